// Where the simulator's ordered frames go: frames.bin and truth.bin (docs/simulator.md), or
// only a count (--bench).
#pragma once

#include <cstdio>
#include <filesystem>
#include <vector>

#include "tools/sim/packetizer.h"

namespace petdaq::sim {

class FileSink : public FrameSink {
 public:
  FileSink(const std::filesystem::path& frames, const std::filesystem::path& truth)
      : frames_(open(frames)), truth_(open(truth)), buffer_(4096 * kTruthBytes) {}
  ~FileSink() override {
    if (frames_) std::fclose(frames_);
    if (truth_) std::fclose(truth_);
  }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  void write(const RawFrame* frames, const TruthRecord* truth, std::size_t n) override {
    put(frames_, frames, n * sizeof(RawFrame));
    for (std::size_t i = 0; i < n;) {
      const std::size_t m = std::min(n - i, buffer_.size() / kTruthBytes);
      for (std::size_t j = 0; j < m; ++j) encode_truth(truth[i + j], &buffer_[j * kTruthBytes]);
      put(truth_, buffer_.data(), m * kTruthBytes);
      i += m;
    }
  }

  void close() {
    for (std::FILE** f : {&frames_, &truth_}) {
      if (*f && std::fclose(*f) != 0) throw std::runtime_error("petdaq-sim: cannot finish writing output");
      *f = nullptr;
    }
  }

 private:
  static std::FILE* open(const std::filesystem::path& p) {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    if (!f) throw std::runtime_error("petdaq-sim: cannot create " + p.string());
    std::setvbuf(f, nullptr, _IOFBF, 1 << 22);
    return f;
  }
  static void put(std::FILE* f, const void* data, std::size_t bytes) {
    if (bytes && std::fwrite(data, 1, bytes, f) != bytes)
      throw std::runtime_error("petdaq-sim: write failed (disk full?)");
  }
  std::FILE* frames_;
  std::FILE* truth_;
  std::vector<std::uint8_t> buffer_;
};

class CountingSink : public FrameSink {
 public:
  void write(const RawFrame*, const TruthRecord*, std::size_t n) override { frames += n; }
  std::uint64_t frames = 0;
};

}  // namespace petdaq::sim
