// petdaq-bench-image: adds the records of a list-mode file to the live image (core/image.h,
// ImageSet::add_records, as the CPU backend does) again and again, and prints the cost per
// record in ns of thread CPU time (best of the repeats) and the image's tallies; then the
// cost of one `image` publication on the daemon's worker thread (the window's update and the
// message body), the GPU backend's copy of the bins aside.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <vector>

#include "common/cli.h"
#include "core/image.h"
#include "core/plm_file.h"
#include "core/settings.h"

namespace {

using namespace petdaq;

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path config, input;
  unsigned repeats = 5;
  cli::App app("petdaq-bench-image",
               "Adds the prompt and delayed records of a list-mode file to the live image of "
               "the configuration's output.image settings (turned on), as the CPU backend "
               "does, and prints the CPU time per record.");
  cli::add_config(app, config, "the YAML configuration (scanner, output.image)")->required();
  cli::add_input(app, input, "a list-mode (.plm) file")->required();
  app.add_option("--repeats", repeats, "passes over the records (the best is reported)")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  if (const auto code = app.parse_or_exit(argc, argv)) return *code;
  try {
    Settings s = load_settings(config);
    s.output.image.enabled = true;
    std::vector<CoincRecord> prompts, delayed, batch;
    PlmReader reader(input);
    MessageHeader h;
    while (reader.next(h, batch))
      (h.kind == static_cast<std::uint16_t>(MessageKind::delayed) ? delayed : prompts)
          .insert((h.kind == static_cast<std::uint16_t>(MessageKind::delayed) ? delayed : prompts).end(),
                  batch.begin(), batch.end());
    if (prompts.empty()) {
      std::fprintf(stderr, "petdaq-bench-image: %s holds no prompt record\n", input.c_str());
      return 2;
    }
    ImageSet image(s);
    double best = 1e300;
    for (unsigned r = 0; r < repeats; ++r) {
      image.reset();
      const double t0 = thread_seconds();
      image.add_records(prompts.data(), prompts.size(), false);
      image.add_records(delayed.data(), delayed.size(), true);
      best = std::min(best, thread_seconds() - t0);
    }
    const std::size_t n = prompts.size() + (image.layout().subtract_delayed ? delayed.size() : 0);
    std::printf("records          %zu prompts, %zu delayed (%s)\n", prompts.size(), delayed.size(),
                image.layout().subtract_delayed ? "subtracted" : "ignored");
    std::printf("image            %u x %u x %u voxels of %.2f mm; in the field: %llu prompts, %llu "
                "delayed; outside: %llu, %llu\n",
                image.layout().nx, image.layout().ny, image.layout().nz, s.output.image.voxel_mm,
                static_cast<unsigned long long>(image.tally(ImageTally::prompts_in)),
                static_cast<unsigned long long>(image.tally(ImageTally::delayed_in)),
                static_cast<unsigned long long>(image.tally(ImageTally::prompts_out)),
                static_cast<unsigned long long>(image.tally(ImageTally::delayed_out)));
    std::printf("cost             %.1f ns of thread CPU time per record (best of %u passes, %.3f s)\n",
                1e9 * best / static_cast<double>(n), repeats, best);
    // One publication as the worker makes it: the window, then the body.
    ImageWindow window(s, image.layout());
    std::vector<std::uint8_t> body;
    ImageSpan span;
    span.run_first_tick = prompts.front().time_a;
    span.run_end_tick = prompts.back().time_a + 1;
    double best_publish = 1e300;
    for (unsigned r = 0; r < repeats; ++r) {
      const double t0 = thread_seconds();
      window.update(image.voxels(), span.run_first_tick, span.run_end_tick);
      span.window_first_tick = window.window_first_tick();
      span.window_end_tick = span.run_end_tick;
      encode_image_file(image, s, 1, window.window(), span, body);
      best_publish = std::min(best_publish, thread_seconds() - t0);
    }
    std::printf("publication      %.3f ms of thread CPU time (window and %zu-byte body, best of "
                "%u)\n",
                1e3 * best_publish, body.size(), repeats);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petdaq-bench-image: %s\n", e.what());
    return 2;
  }
}
