// The simulator's truth: one 32-byte little-endian record per frame of frames.bin, in the
// same order (layout documented in docs/simulator.md).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "proto/bytes.h"

namespace petdaq::sim {

enum class PhotonKind : std::uint8_t {
  annihilation = 1,  // an annihilation photon that reached the detector unscattered
  scattered = 2,     // an annihilation photon that Compton-scattered in the phantom first
  background = 3,    // intrinsic LYSO (176Lu) radiation: a single with no partner
};

namespace truth_flag {
inline constexpr std::uint8_t mispositioned = 1u << 0;  // flood-map label names another crystal
inline constexpr std::uint8_t no_crystal = 1u << 1;     // flood-map label names no crystal
}  // namespace truth_flag

inline constexpr std::size_t kTruthBytes = 32;

struct TruthRecord {
  std::uint64_t event_id = 0;     // decay (or background event); (block << 32) | index
  std::uint64_t event_ticks = 0;  // emission time on the frame clock, before any delay
  std::uint32_t crystal = 0;      // global id of the crystal the photon interacted in
  float energy_keV = 0;           // measured energy (resolution applied), before the ADC
  PhotonKind kind = PhotonKind::annihilation;
  std::uint8_t photon = 0;        // 0 or 1: which photon of the decay
  std::uint8_t phantom_scatters = 0;
  std::uint8_t flags = 0;         // truth_flag bits
  std::uint8_t pile_up = 0;       // photons summed into this frame after the first (pile-up)
  std::uint8_t reserved[3] = {};
};

inline void encode_truth(const TruthRecord& t, std::uint8_t* p) {
  bytes::store_le64(p + 0, t.event_id);
  bytes::store_le64(p + 8, t.event_ticks);
  bytes::store_le32(p + 16, t.crystal);
  bytes::store_le32(p + 20, std::bit_cast<std::uint32_t>(t.energy_keV));
  p[24] = static_cast<std::uint8_t>(t.kind);
  p[25] = t.photon;
  p[26] = t.phantom_scatters;
  p[27] = t.flags;
  p[28] = t.pile_up;
  p[29] = t.reserved[0];
  p[30] = t.reserved[1];
  p[31] = t.reserved[2];
}

inline TruthRecord decode_truth(const std::uint8_t* p) {
  TruthRecord t;
  t.event_id = bytes::load_le64(p + 0);
  t.event_ticks = bytes::load_le64(p + 8);
  t.crystal = bytes::load_le32(p + 16);
  t.energy_keV = std::bit_cast<float>(bytes::load_le32(p + 20));
  t.kind = static_cast<PhotonKind>(p[24]);
  t.photon = p[25];
  t.phantom_scatters = p[26];
  t.flags = p[27];
  t.pile_up = p[28];
  t.reserved[0] = p[29];
  t.reserved[1] = p[30];
  t.reserved[2] = p[31];
  return t;
}

}  // namespace petdaq::sim
