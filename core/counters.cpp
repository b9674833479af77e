#include "core/counters.h"

#include <stdexcept>
#include <string>

namespace petdaq {

Counters::Counters(std::uint32_t bdm_count)
    : bdm_count_(bdm_count),
      per_bdm_(std::make_unique<std::atomic<std::uint64_t>[]>(
          static_cast<std::size_t>(PerBdm::kinds) * bdm_count)) {
  for (auto& v : values_) v.store(0, std::memory_order_relaxed);
  for (std::size_t i = 0; i < static_cast<std::size_t>(PerBdm::kinds) * bdm_count; ++i)
    per_bdm_[i].store(0, std::memory_order_relaxed);
}

void Counters::add(const CounterDelta& d) {
  for (std::size_t i = 0; i < kCounterCount; ++i)
    if (d.value[i]) values_[i].fetch_add(d.value[i], std::memory_order_relaxed);
}

std::uint64_t Counters::get(std::string_view name) const {
  for (std::size_t i = 0; i < kCounterCount; ++i)
    if (counter_name(static_cast<Counter>(i)) == name) return values_[i].load(std::memory_order_relaxed);
  throw std::out_of_range("no counter named '" + std::string(name) + "'");
}

}  // namespace petdaq
