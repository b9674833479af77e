// The counters registry (DESIGN section 8).
#include "core/counters.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <stdexcept>
#include <string>

namespace petdaq {
namespace {

TEST(Counters, NamesAreUniqueAndDotted) {
  const std::regex dotted("[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)+");
  std::set<std::string> names;
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    const std::string name(counter_name(static_cast<Counter>(i)));
    EXPECT_TRUE(std::regex_match(name, dotted)) << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
  }
}

TEST(Counters, EveryDesignCounterExists) {
  const char* design[] = {
      "rx.datagrams",       "rx.bytes",           "rx.frames",           "rx.trailing_bytes",
      "rx.kernel_drops",    "rx.ring_full",       "rx.seq_missing",      "rx.seq_duplicate",
      "rx.seq_reordered",   "rx.foreign_source",  "frame.bad_marker",    "frame.bad_bdm",
      "frame.bad_du",       "frame.bad_position", "frame.no_crystal",    "frame.bad_time",
      "single.energy_rejected", "stream.late",    "stream.time_jump",    "stream.source_idle",
      "stream.runs",        "coinc.prompts",      "coinc.delayed",       "coinc.multiples",
      "coinc.delayed_multiples", "out.zmq_refused",
  };
  const Counters c(1);
  for (const char* name : design) {
    bool found = false;
    for (std::size_t i = 0; i < kCounterCount; ++i)
      found = found || counter_name(static_cast<Counter>(i)) == name;
    EXPECT_TRUE(found) << name;
    EXPECT_NO_THROW(EXPECT_EQ(c.get(name), 0u)) << name;
  }
}

TEST(Counters, DeltaAddsIntoTheRegistry) {
  CounterDelta a;
  a[Counter::frame_bad_bdm] = 3;
  a[Counter::rx_frames] = 10;
  CounterDelta b;
  b[Counter::frame_bad_bdm] = 4;
  b[Counter::coinc_prompts] = 1;
  a += b;
  EXPECT_EQ(a[Counter::frame_bad_bdm], 7u);
  EXPECT_EQ(a[Counter::rx_frames], 10u);
  EXPECT_EQ(a[Counter::coinc_prompts], 1u);
  EXPECT_EQ(b[Counter::rx_frames], 0u);

  Counters c(4);
  c.add(a);
  c.add(a);
  c.add(Counter::rx_frames);
  c.add(Counter::rx_frames, 5);
  EXPECT_EQ(c.get(Counter::frame_bad_bdm), 14u);
  EXPECT_EQ(c.get(Counter::rx_frames), 26u);
  EXPECT_EQ(c.get(Counter::coinc_prompts), 2u);
  EXPECT_EQ(c.get(Counter::frame_bad_du), 0u);
  EXPECT_EQ(c.get("frame.bad_bdm"), 14u);
  EXPECT_EQ(c.get("rx.frames"), 26u);
  EXPECT_EQ(c.get("coinc.prompts"), 2u);
}

TEST(Counters, GetByNameMatchesGetByEnum) {
  Counters c(1);
  for (std::size_t i = 0; i < kCounterCount; ++i) c.add(static_cast<Counter>(i), i + 1);
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    const auto id = static_cast<Counter>(i);
    EXPECT_EQ(c.get(counter_name(id)), i + 1) << counter_name(id);
    EXPECT_EQ(c.get(id), i + 1);
  }
}

TEST(Counters, UnknownNameThrows) {
  const Counters c(1);
  EXPECT_THROW(c.get("rx.nothing"), std::out_of_range);
  EXPECT_THROW(c.get(""), std::out_of_range);
  EXPECT_THROW(c.get("rx"), std::out_of_range);
  try {
    c.get("frame.bad_colour");
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("frame.bad_colour"), std::string::npos);
  }
}

TEST(Counters, PerBdmCounts) {
  Counters c(3);
  EXPECT_EQ(c.bdm_count(), 3u);
  for (std::uint32_t b = 0; b < 3; ++b) {
    EXPECT_EQ(c.bdm_singles(b), 0u);
    EXPECT_EQ(c.bdm_energy_rejected(b), 0u);
  }
  c.add_bdm_singles(2, 5);
  c.add_bdm_singles(2, 1);
  c.add_bdm_energy_rejected(0, 7);
  EXPECT_EQ(c.bdm_singles(2), 6u);
  EXPECT_EQ(c.bdm_singles(0), 0u);
  EXPECT_EQ(c.bdm_energy_rejected(0), 7u);
  EXPECT_EQ(c.bdm_energy_rejected(2), 0u);
}

}  // namespace
}  // namespace petdaq
