// The `rates` document petdaqd publishes once a second (DESIGN section 7, "`rates` document
// fields"): every member's name and JSON type, written once. The writer (daemon/rates.cpp,
// and daemon/alarms.cpp for `alarms`) and the readers in C++ (daemon/alarms.cpp,
// daemon/metrics.cpp, daemon/catalogue.cpp, tools/top/rates.cpp, tools/web/messages.cpp)
// take the names from here, as rates_doc::<object>::<member>:
//   doc[rates_doc::doc::rates][rates_doc::rates::prompts]
//
// Elsewhere the names are text, checked by tests:
// * docs/DESIGN.md section 7 lists every field with its type: tests/proto/rates_schema_test
//   compares that table with this list, and daemon_unit_test a published document with it.
// * petdaq-web hands the browser its own `rates` message (tools/web/messages.cpp) that keeps
//   the document's names for what it passes on; its page (tools/web/page/app.js) reads them
//   there: rates_schema_test checks that the members the page reads are names of this list.
// * tools/calibrate/petdaq_calibrate/dead_time.py names `bdm.singles_per_s` in its output's
//   description. The Python package (python/petdaq) reads no rates document.
#pragma once

#include <string_view>

namespace petdaq::rates_doc {

// The document's `version`; a reader refuses any other.
inline constexpr int kVersion = 1;

// The JSON types of DESIGN section 7's table.
enum class Type {
  integer,
  number,
  string,
  boolean,
  object,  // a member holding fields listed under its own name (not a row of the table)
  number_or_null,
  object_or_null,
  array_of_number,
  array_of_number_or_null,
  array_of_integer,
  array_of_boolean,
  array_of_object,
};

// As DESIGN section 7 writes it.
constexpr std::string_view type_name(Type t) {
  switch (t) {
    case Type::integer: return "integer";
    case Type::number: return "number";
    case Type::string: return "string";
    case Type::boolean: return "boolean";
    case Type::object: return "object";
    case Type::number_or_null: return "number or null";
    case Type::object_or_null: return "object or null";
    case Type::array_of_number: return "array of number";
    case Type::array_of_number_or_null: return "array of number or null";
    case Type::array_of_integer: return "array of integer";
    case Type::array_of_boolean: return "array of boolean";
    case Type::array_of_object: return "array of object";
  }
  return "";
}

// X(object, identifier, "name", type): `object` is where the member sits — `doc` the top
// level, `phase` each member of worker.phases (one per worker phase, by its name), `alarm`
// each element of alarms, every other one the member of `doc` of that name. `counters`
// holds every counter by its dotted name (core/counters.h), integers.
#define PETDAQ_RATES_FIELDS(X)                                           \
  X(doc, version, "version", integer)                                    \
  X(doc, time_unix_ns, "time_unix_ns", integer)                          \
  X(doc, uptime_s, "uptime_s", number)                                   \
  X(doc, backend, "backend", string)                                     \
  X(doc, run_id, "run_id", integer)                                      \
  X(doc, interval_s, "interval_s", number)                               \
  X(doc, rates, "rates", object)                                         \
  X(doc, live_time_model, "live_time_model", object)                     \
  X(doc, bdm, "bdm", object)                                             \
  X(doc, deadtime, "deadtime", object)                                   \
  X(doc, counters, "counters", object)                                   \
  X(doc, queues, "queues", object)                                       \
  X(doc, latency_ms, "latency_ms", object)                               \
  X(doc, worker, "worker", object)                                       \
  X(doc, acquisition, "acquisition", object_or_null)                     \
  X(doc, alarms, "alarms", array_of_object)                              \
  X(rates, frames, "frames", number)                                     \
  X(rates, singles, "singles", number)                                   \
  X(rates, prompts, "prompts", number)                                   \
  X(rates, delayed, "delayed", number)                                   \
  X(rates, trues, "trues", number)                                       \
  X(rates, multiples, "multiples", number)                               \
  X(rates, randoms_fraction, "randoms_fraction", number)                 \
  X(rates, necr, "necr", number)                                         \
  X(rates, randoms, "randoms", number)                                   \
  X(rates, randoms_method, "randoms_method", string)                     \
  X(rates, randoms_singles_rate, "randoms_singles_rate", number)         \
  X(rates, randoms_singles_prompts, "randoms_singles_prompts", number_or_null) \
  X(live_time_model, model, "model", string)                             \
  X(live_time_model, bdm_live_fraction, "bdm_live_fraction", array_of_number) \
  X(live_time_model, singles_live_fraction, "singles_live_fraction", number) \
  X(live_time_model, coincidence_live_fraction, "coincidence_live_fraction", number) \
  X(live_time_model, trues_corrected, "trues_corrected", number)         \
  X(live_time_model, saturated_bdms, "saturated_bdms", integer)          \
  X(bdm, transaxial, "transaxial", integer)                              \
  X(bdm, axial, "axial", integer)                                        \
  X(bdm, singles_per_s, "singles_per_s", array_of_number)                \
  X(bdm, temperature_degC, "temperature_degC", array_of_number_or_null)  \
  X(bdm, lagging, "lagging", array_of_boolean)                           \
  X(bdm, frames_taken, "frames_taken", array_of_integer)                 \
  X(bdm, late, "late", array_of_integer)                                 \
  X(bdm, dead, "dead", array_of_integer)                                 \
  X(bdm, ring_full, "ring_full", array_of_integer)                       \
  X(bdm, socket_kernel_drops, "socket_kernel_drops", array_of_integer)   \
  X(deadtime, shedding, "shedding", boolean)                             \
  X(deadtime, dead_s_run, "dead_s_run", number)                          \
  X(deadtime, live_fraction_run, "live_fraction_run", number)            \
  X(deadtime, live_fraction_interval, "live_fraction_interval", number)  \
  X(queues, ring_chunks, "ring_chunks", integer)                         \
  X(queues, ring_free, "ring_free", integer)                             \
  X(queues, ring_used_max, "ring_used_max", integer)                     \
  X(queues, sealed_max, "sealed_max", integer)                           \
  X(queues, staging_max, "staging_max", integer)                         \
  X(queues, pending_frames, "pending_frames", integer)                   \
  X(queues, subscribers, "subscribers", integer)                         \
  X(latency_ms, p50, "p50", number)                                      \
  X(latency_ms, p99, "p99", number)                                      \
  X(latency_ms, max, "max", number)                                      \
  X(worker, seconds, "seconds", number)                                  \
  X(worker, cpu_seconds, "cpu_seconds", number)                          \
  X(worker, involuntary_switches, "involuntary_switches", integer)       \
  X(worker, phases, "phases", object)                                    \
  X(phase, seconds, "seconds", number)                                   \
  X(phase, calls, "calls", integer)                                      \
  X(phase, max_ms, "max_ms", number)                                     \
  X(phase, max_ms_since_start, "max_ms_since_start", number)             \
  X(phase, log2_us, "log2_us", array_of_integer)                         \
  X(acquisition, id, "id", integer)                                      \
  X(acquisition, name, "name", string)                                   \
  X(acquisition, subject, "subject", string)                             \
  X(acquisition, isotope, "isotope", string)                             \
  X(acquisition, activity_MBq, "activity_MBq", number_or_null)           \
  X(acquisition, operator_name, "operator", string)                      \
  X(acquisition, started_unix_ns, "started_unix_ns", integer)            \
  X(acquisition, annotations, "annotations", integer)                    \
  X(alarm, name, "name", string)                                         \
  X(alarm, subject, "subject", string)                                   \
  X(alarm, message, "message", string)                                   \
  X(alarm, value, "value", number)                                       \
  X(alarm, threshold, "threshold", number)                               \
  X(alarm, since_unix_ns, "since_unix_ns", integer)

// The names: rates_doc::bdm::singles_per_s is "singles_per_s".
#define PETDAQ_RATES_NAME(object, identifier, name, type) \
  namespace object {                                      \
  inline constexpr const char* identifier = name;        \
  }
PETDAQ_RATES_FIELDS(PETDAQ_RATES_NAME)
#undef PETDAQ_RATES_NAME

// The list itself, for the tests that compare it with the other places the names appear.
struct Field {
  std::string_view object;
  std::string_view name;
  Type type;
};
#define PETDAQ_RATES_ROW(object, identifier, name, type) Field{#object, name, Type::type},
inline constexpr Field kFields[] = {PETDAQ_RATES_FIELDS(PETDAQ_RATES_ROW)};
#undef PETDAQ_RATES_ROW

}  // namespace petdaq::rates_doc
