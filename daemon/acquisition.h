// Named acquisitions (docs/operations.md, "Acquisitions"): what an operator says is being
// acquired — a name and its metadata, opened by `petdaq-ctl start` and closed by `stop` —
// beside the scanner's own runs, which begin and end on its clock. Live publishing goes on
// whether or not an acquisition is open. The state is shared by the control thread (which
// changes it) and the worker (which reads it when it publishes `rates` and writes files);
// every change bumps a version the worker polls without a lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace petdaq::daemon {

struct Annotation {
  std::uint64_t time_unix_ns = 0;
  std::string text;
};

struct Acquisition {
  std::uint64_t id = 0;  // unique per catalogue (or per daemon start without one)
  std::string name;
  std::string subject, isotope, operator_name, notes;
  std::optional<double> activity_MBq;
  std::uint64_t started_unix_ns = 0;
  std::uint64_t ended_unix_ns = 0;  // 0 while open
  std::string end_reason;           // "stop", "daemon stopped", ...
  std::vector<Annotation> annotations;

  nlohmann::json to_json() const;
};

// The longest name, metadata field and annotation accepted, in bytes.
inline constexpr std::size_t kMaxAcquisitionText = 1024;

class AcquisitionControl {
 public:
  // `next_id`: the first id to hand out (the catalogue's next free one).
  explicit AcquisitionControl(std::uint64_t next_id = 1) : next_id_(next_id) {}

  // Each returns the acquisition after the change, or throws std::invalid_argument with the
  // reason a person reads (a second start, a stop with none open, a bad field).
  Acquisition start(const nlohmann::json& request, std::uint64_t now_unix_ns);
  Acquisition stop(std::uint64_t now_unix_ns, const std::string& reason = "stop");
  Acquisition annotate(const std::string& text, std::uint64_t now_unix_ns);
  // The open acquisition, if any.
  std::optional<Acquisition> current() const;
  // The open one, else the one closed last (its end set), else none.
  std::optional<Acquisition> latest() const;
  // Changes so far (the worker compares it with the one it last saw).
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // Called on every change, on the changing thread, outside the lock (the catalogue).
  void on_change(std::function<void(const Acquisition&, const char* what)> f) {
    observer_ = std::move(f);
  }

 private:
  mutable std::mutex mutex_;
  std::optional<Acquisition> open_;
  std::optional<Acquisition> closed_;
  std::uint64_t next_id_;
  std::atomic<std::uint64_t> version_{0};
  std::function<void(const Acquisition&, const char*)> observer_;
};

}  // namespace petdaq::daemon
