// The messages the test publisher sends and the tests expect: known rates documents and
// known coincidence batches, made by the same functions on both sides.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "proto/records.h"

namespace petdaq::test {

inline constexpr std::uint64_t kTestRunId = 3;

// Records of batch `index` of one kind: 3 to 6 of them, every field distinct and known.
inline std::vector<CoincRecord> test_batch_records(MessageKind kind, std::uint64_t index) {
  std::vector<CoincRecord> out;
  const std::uint32_t n = 3 + static_cast<std::uint32_t>(index % 4);
  for (std::uint32_t j = 0; j < n; ++j) {
    CoincRecord r{};
    r.time_a = 1000 * index + 10 * j;
    r.dt = kind == MessageKind::delayed ? -static_cast<std::int32_t>(j) : 5 * static_cast<std::int32_t>(j);
    r.crystal_a = static_cast<std::uint32_t>(100 * index + j);
    r.crystal_b = r.crystal_a + 7;
    r.energy_a = 511.0f + static_cast<float>(j);
    r.energy_b = 480.5f - static_cast<float>(j);
    r.flags = (kind == MessageKind::delayed ? coinc_flag::delayed : 0u) |
              (2u << coinc_flag::multiplicity_shift);
    out.push_back(r);
  }
  return out;
}

inline MessageHeader test_batch_header(MessageKind kind, std::uint64_t index,
                                       std::uint64_t message_id, std::uint32_t record_count) {
  MessageHeader h;
  h.kind = static_cast<std::uint16_t>(kind);
  h.message_id = message_id;
  h.run_id = kTestRunId;
  h.slice_id = index;
  h.t_begin = 1000 * index;
  h.t_end = 1000 * (index + 1);
  h.record_count = record_count;
  h.record_size = sizeof(CoincRecord);
  return h;
}

// A rates document (schema in docs/tools.md) with every value known.
inline std::string test_rates_json(std::uint64_t sequence) {
  std::string bdm_singles, bdm_temps;
  for (int b = 0; b < 24; ++b) {
    if (b) {
      bdm_singles += ", ";
      bdm_temps += ", ";
    }
    bdm_singles += std::to_string(10000 * (b + 1)) + ".0";
    char t[16];
    std::snprintf(t, sizeof t, "%.1f", 30.0 + 0.5 * b);
    bdm_temps += b == 5 ? std::string("null") : std::string(t);
  }
  char head[512];
  std::snprintf(head, sizeof head,
                "{\n  \"version\": 1,\n  \"time_unix_ns\": %llu,\n  \"uptime_s\": 3723.0,\n"
                "  \"backend\": \"cpu\",\n  \"run_id\": %llu,\n  \"interval_s\": 1.0,\n",
                static_cast<unsigned long long>(1763768000000000000ull + sequence * 1000000000ull),
                static_cast<unsigned long long>(kTestRunId));
  return std::string(head) +
         "  \"rates\": {\"frames\": 2500000.0, \"singles\": 2345678.0, \"prompts\": 123456.0,"
         " \"delayed\": 12345.0, \"trues\": 111111.0, \"multiples\": 1234.0,"
         " \"randoms_fraction\": 0.1, \"necr\": 100000.0, \"randoms\": 12345.0,"
         " \"randoms_method\": \"singles_prompts\", \"randoms_singles_rate\": 20500.0,"
         " \"randoms_singles_prompts\": 12345.0},\n"
         "  \"bdm\": {\"transaxial\": 12, \"axial\": 2, \"singles_per_s\": [" + bdm_singles +
         "], \"temperature_degC\": [" + bdm_temps + "]},\n"
         "  \"counters\": {\"rx.datagrams\": 4242, \"rx.frames\": 999, \"rx.kernel_drops\": 7,"
         " \"rx.seq_missing\": 3, \"stream.late\": 0, \"out.zmq_refused\": 0},\n"
         "  \"queues\": {\"ring_chunks\": 64, \"ring_free\": 60, \"pending_frames\": 17},\n"
         "  \"latency_ms\": {\"p50\": 1.5, \"p99\": 4.25, \"max\": 9.75},\n"
         "  \"alarms\": [{\"name\": \"board_temperature\", \"subject\": \"bdm 23\","
         " \"message\": \"BDM 23 at 41.5 C, outside [-40.0, 40.0] C\", \"value\": 41.5,"
         " \"threshold\": 40.0, \"since_unix_ns\": 1763768000000000000}]\n}";
}

}  // namespace petdaq::test
