// petdaq-dump: a list-mode (.plm) file as text, one line per record (coincidences, and the
// singles of a file that records them), so that two outputs can be compared with diff;
// --summary prints only the counts. Messages of kinds it does not print are counted.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "common/cli.h"
#include "core/plm_file.h"

namespace {

const char* kind_name(std::uint16_t kind) { return kind == 1 ? "prompt" : "delayed"; }

}  // namespace

int main(int argc, char** argv) {
  using namespace petdaq;
  cli::App app("petdaq-dump",
               "Prints a list-mode (.plm) file: the file header, then one line per record: "
               "kind run slice time_a dt crystal_a crystal_b energy_a energy_b flags; singles "
               "(a file that records them) as: single run slice time crystal energy. A file "
               "still being written is read up to its last complete message.");
  bool summary = false, messages = false;
  std::filesystem::path file;
  cli::add_input(app, file, "the .plm file")->required();
  app.add_flag("--summary", summary, "only the counts");
  app.add_flag("--messages", messages, "also one line per message header");
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  try {
    PlmReader reader(file);
    const PlmHeader& h = reader.header();
    std::printf("# petdaq list-mode file version %u\n", h.version);
    std::printf("# tick_ps %.17g crystal_count %u crystals_per_ring %u settings_hash %016" PRIx64
                " created_unix_ns %" PRIu64 "\n",
                h.tick_ps, h.crystal_count, h.crystals_per_ring, h.settings_hash, h.created_unix_ns);
    MessageHeader m;
    std::vector<std::uint8_t> body;
    std::vector<CoincRecord> records;
    std::uint64_t single_messages = 0, single_count = 0;
    std::map<std::uint16_t, std::uint64_t> skipped;
    std::uint64_t message_count[3] = {}, record_count[3] = {}, from_multiple[3] = {};
    std::uint64_t runs = 0, last_run = 0;
    std::uint64_t t_first = 0, t_last = 0;
    bool any = false;
    std::uint64_t dead_messages = 0, dead_ticks = 0, dead_frames = 0;
    while (reader.next_message(m, body, true)) {
      if (m.kind == static_cast<std::uint16_t>(MessageKind::singles)) {
        ++single_messages;
        single_count += m.record_count;
        if (messages && !summary)
          std::printf("# message single id %" PRIu64 " run %" PRIu64 " slice %" PRIu64
                      " t [%" PRIu64 ", %" PRIu64 ") records %u\n",
                      m.message_id, m.run_id, m.slice_id, m.t_begin, m.t_end, m.record_count);
        if (summary) continue;
        for (std::uint32_t i = 0; i < m.record_count; ++i) {
          Single sg;
          std::memcpy(&sg, body.data() + i * sizeof(Single), sizeof sg);
          std::printf("single %" PRIu64 " %" PRIu64 " %" PRIu64 " %u %.9g\n", m.run_id,
                      m.slice_id, sg.time, sg.crystal, static_cast<double>(sg.energy));
        }
        continue;
      }
      if (m.kind == static_cast<std::uint16_t>(MessageKind::deadtime) &&
          m.record_size == sizeof(DeadInterval)) {
        // Acquisition time shed as dead time (DESIGN section 6, "Overload").
        ++dead_messages;
        for (std::uint32_t i = 0; i < m.record_count; ++i) {
          DeadInterval d;
          std::memcpy(&d, body.data() + i * sizeof(DeadInterval), sizeof d);
          dead_ticks += d.t_end > d.t_begin ? d.t_end - d.t_begin : 0;
          dead_frames += d.frames_dropped;
          if (!summary)
            std::printf("deadtime %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", m.run_id,
                        d.t_begin, d.t_end, d.frames_dropped);
        }
        continue;
      }
      if (m.kind != static_cast<std::uint16_t>(MessageKind::prompts) &&
          m.kind != static_cast<std::uint16_t>(MessageKind::delayed)) {
        ++skipped[m.kind];
        continue;
      }
      records.resize(m.record_count);
      std::memcpy(records.data(), body.data(), body.size());
      const int k = m.kind == 1 ? 1 : 2;
      ++message_count[k];
      record_count[k] += records.size();
      if (!any || m.run_id != last_run) ++runs;
      if (!any) t_first = m.t_begin;
      t_last = m.t_end;
      any = true;
      last_run = m.run_id;
      if (messages && !summary)
        std::printf("# message %s id %" PRIu64 " run %" PRIu64 " slice %" PRIu64 " t [%" PRIu64
                    ", %" PRIu64 ") records %u\n",
                    kind_name(m.kind), m.message_id, m.run_id, m.slice_id, m.t_begin, m.t_end,
                    m.record_count);
      for (const CoincRecord& r : records) {
        if (r.flags & coinc_flag::from_multiple) ++from_multiple[k];
        if (summary) continue;
        std::printf("%s %" PRIu64 " %" PRIu64 " %" PRIu64 " %d %u %u %.9g %.9g 0x%08x\n",
                    kind_name(m.kind), m.run_id, m.slice_id, r.time_a, r.dt, r.crystal_a,
                    r.crystal_b, static_cast<double>(r.energy_a), static_cast<double>(r.energy_b),
                    r.flags);
      }
    }
    std::printf("# messages prompt %" PRIu64 " delayed %" PRIu64 "\n", message_count[1],
                message_count[2]);
    std::printf("# records prompt %" PRIu64 " delayed %" PRIu64 " (from multiples: %" PRIu64
                " and %" PRIu64 ")\n",
                record_count[1], record_count[2], from_multiple[1], from_multiple[2]);
    std::printf("# runs %" PRIu64 " ticks [%" PRIu64 ", %" PRIu64 ")\n", runs, t_first, t_last);
    if (single_messages)
      std::printf("# singles messages %" PRIu64 " records %" PRIu64 "\n", single_messages,
                  single_count);
    for (const auto& [kind, n] : skipped)
      std::printf("# skipped %" PRIu64 " message(s) of kind %u (not printed by this tool)\n", n,
                  static_cast<unsigned>(kind));
    if (reader.partial_tail_bytes() && !any) {
      // Nothing complete at all: a corrupt first record_count, which would read as an empty
      // file, or a file created a moment ago.
      std::fprintf(stderr,
                   "petdaq-dump: %s: no complete message: the first one, at byte %" PRIu64
                   ", needs more than the %" PRIu64 " bytes that follow (corrupt, or still "
                   "being written)\n",
                   file.c_str(), reader.partial_tail_offset(), reader.partial_tail_bytes());
      return 1;
    }
    if (dead_messages)
      std::printf("# dead time: %" PRIu64 " intervals, %" PRIu64 " ticks, %" PRIu64
                  " frames dropped\n",
                  dead_messages, dead_ticks, dead_frames);
    if (reader.partial_tail_bytes()) {
      std::printf("# partial message at byte %" PRIu64 " (%" PRIu64 " bytes) not read\n",
                  reader.partial_tail_offset(), reader.partial_tail_bytes());
      std::fprintf(stderr,
                   "petdaq-dump: %s: read up to the last complete message; the %" PRIu64
                   " bytes after it are a partial message (file still being written, or "
                   "truncated)\n",
                   file.c_str(), reader.partial_tail_bytes());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-dump: %s\n", e.what());
    return 2;
  }
  return 0;
}
