// The worker's sinks room: where the slices' messages go. The ZeroMQ publisher (with the
// message arena the backend writes records into), the optional list-mode file and raw
// capture, which kinds each takes, and the run catalogue told of each run's start.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/message_builder.h"
#include "core/message_arena.h"
#include "daemon/catalogue.h"
#include "daemon/file_sink.h"
#include "daemon/publisher.h"
#include "daemon/raw_sink.h"

namespace petdaq::daemon {

struct WorkerSinks {
  WorkerSinks(Publisher& p, MessageArena* a) : publisher(p), arena(a) {}

  // The catalogue is told of every file the sinks open and close.
  void set_catalogue(Catalogue* c) {
    catalogue = c;
    if (!c) return;
    // Files of one kind ("plm", "frames") opened and closed.
    auto observer = [c](const char* kind) {
      return [c, kind](const std::filesystem::path& p, bool opened) {
        if (opened)
          c->file_opened(p, kind);
        else
          c->file_closed(p);
      };
    };
    if (file) file->set_file_observer(observer("plm"));
    if (raw) raw->set_file_observer(observer("frames"));
  }
  // Tells the catalogue (if any) that `run` started, once per run.
  void note_run(std::uint64_t run) {
    if (catalogue && run != catalogue_run) {  // the run's first slice
      catalogue_run = run;
      catalogue->run_started(run);
    }
  }

  Publisher& publisher;
  // Lent to the backend for its results (published without a copy); null: off.
  MessageArena* arena;
  MessageBuilder builder;
  std::unique_ptr<FileSink> file;  // output.file
  std::unique_ptr<RawSink> raw;    // output.raw
  bool publish_delayed = false;
  bool publish_singles = false;  // output.singles.enabled: the `singles` topic
  bool file_singles = false;     // output.file.singles: kind-3 messages in the .plm files
  Catalogue* catalogue = nullptr;
  std::uint64_t catalogue_run = 0;  // the run the catalogue was last told started
};

}  // namespace petdaq::daemon
