#include "daemon/acquisition.h"

#include <cmath>
#include <stdexcept>

namespace petdaq::daemon {

namespace {

// A printable, bounded text field of a request ("" when absent).
std::string text_field(const nlohmann::json& request, const char* key, bool required) {
  const auto it = request.find(key);
  if (it == request.end() || it->is_null()) {
    if (required) throw std::invalid_argument(std::string(key) + " is required");
    return {};
  }
  if (!it->is_string()) throw std::invalid_argument(std::string(key) + " must be a string");
  std::string v = it->get<std::string>();
  if (v.size() > kMaxAcquisitionText)
    throw std::invalid_argument(std::string(key) + " is longer than " +
                                std::to_string(kMaxAcquisitionText) + " bytes");
  for (unsigned char c : v)
    if (c < 0x20 && c != '\t')
      throw std::invalid_argument(std::string(key) + " holds a control character");
  if (required && v.find_first_not_of(" \t") == std::string::npos)
    throw std::invalid_argument(std::string(key) + " must not be blank");
  return v;
}

}  // namespace

nlohmann::json Acquisition::to_json() const {
  nlohmann::json j = {{"id", id},
                      {"name", name},
                      {"subject", subject},
                      {"isotope", isotope},
                      {"activity_MBq", activity_MBq ? nlohmann::json(*activity_MBq) : nullptr},
                      {"operator", operator_name},
                      {"notes", notes},
                      {"started_unix_ns", started_unix_ns},
                      {"ended_unix_ns", ended_unix_ns ? nlohmann::json(ended_unix_ns) : nullptr},
                      {"end_reason", end_reason}};
  nlohmann::json a = nlohmann::json::array();
  for (const Annotation& n : annotations)
    a.push_back({{"time_unix_ns", n.time_unix_ns}, {"text", n.text}});
  j["annotations"] = std::move(a);
  return j;
}

Acquisition AcquisitionControl::start(const nlohmann::json& request, std::uint64_t now) {
  if (!request.is_object()) throw std::invalid_argument("the request must be a JSON object");
  Acquisition a;
  a.name = text_field(request, "name", true);
  a.subject = text_field(request, "subject", false);
  a.isotope = text_field(request, "isotope", false);
  a.operator_name = text_field(request, "operator", false);
  a.notes = text_field(request, "notes", false);
  if (const auto it = request.find("activity_MBq"); it != request.end() && !it->is_null()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      throw std::invalid_argument("activity_MBq must be a number >= 0");
    a.activity_MBq = it->get<double>();
  }
  a.started_unix_ns = now;
  {
    std::lock_guard lock(mutex_);
    if (open_)
      throw std::invalid_argument("acquisition '" + open_->name + "' (id " +
                                  std::to_string(open_->id) +
                                  ") is open: stop it before starting another");
    a.id = next_id_++;
    open_ = a;
    version_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (observer_) observer_(a, "start");
  return a;
}

Acquisition AcquisitionControl::stop(std::uint64_t now, const std::string& reason) {
  Acquisition a;
  {
    std::lock_guard lock(mutex_);
    if (!open_) throw std::invalid_argument("no acquisition is open");
    a = std::move(*open_);
    open_.reset();
    a.ended_unix_ns = now;
    a.end_reason = reason;
    closed_ = a;
    version_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (observer_) observer_(a, "stop");
  return a;
}

Acquisition AcquisitionControl::annotate(const std::string& text, std::uint64_t now) {
  const std::string checked = text_field(nlohmann::json{{"text", text}}, "text", true);
  Acquisition a;
  {
    std::lock_guard lock(mutex_);
    if (!open_) throw std::invalid_argument("no acquisition is open to annotate");
    if (open_->annotations.size() >= 10000)
      throw std::invalid_argument("this acquisition has 10000 annotations already");
    open_->annotations.push_back({now, checked});
    a = *open_;
    version_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (observer_) observer_(a, "annotate");
  return a;
}

std::optional<Acquisition> AcquisitionControl::current() const {
  std::lock_guard lock(mutex_);
  return open_;
}

std::optional<Acquisition> AcquisitionControl::latest() const {
  std::lock_guard lock(mutex_);
  return open_ ? open_ : closed_;
}

}  // namespace petdaq::daemon
