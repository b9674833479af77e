// Random numbers for the simulator: xoshiro256** seeded through splitmix64, so every block
// of an acquisition has its own stream derived from (seed, block) and the output does not
// depend on how many threads made it. Rng is the plain generator (set-up draws); BlockRng,
// for the acquisition itself, runs several xoshiro256** lanes side by side and refills a
// buffer in bulk, a loop the compiler vectorises.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace petdaq::sim {

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E37'79B9'7F4A'7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58'476D'1CE4'E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D0'49BB'1331'11EBull;
  return z ^ (z >> 31);
}

// A well-mixed 64-bit value of a few integers (stream ids, per-crystal draws).
inline std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) {
  std::uint64_t s = a;
  std::uint64_t h = splitmix64(s);
  s = h ^ b;
  h = splitmix64(s);
  s = h ^ c;
  return splitmix64(s);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    std::uint64_t s = seed;
    for (auto& w : state_) w = splitmix64(s);
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // [0, 1)
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // (0, 1]: safe under a logarithm.
  double uniform_open0() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Multiply-shift: bias below n / 2^32, negligible for the n used here.
  std::uint32_t below(std::uint32_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * std::uint64_t{n}) >> 32);
  }
  double exponential(double mean) { return mean * standard_exponential(); }
  double gauss() { return standard_normal(); }

  // Marsaglia and Tsang's ziggurat (2000): see ziggurat_normal below.
  double standard_normal();
  double standard_exponential();

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t state_[4];
};

struct ZigguratTables {
  std::array<std::int64_t, 128> kn;
  std::array<double, 128> wn, fn;
  std::array<std::uint64_t, 256> ke;
  std::array<double, 256> we, fe;

  ZigguratTables() {
    const double m1 = 2147483648.0, m2 = 4294967296.0;
    double dn = 3.442619855899, tn = dn;
    const double vn = 9.91256303526217e-3;
    const double q = vn / std::exp(-0.5 * dn * dn);
    kn[0] = static_cast<std::int64_t>((dn / q) * m1);
    kn[1] = 0;
    wn[0] = q / m1;
    wn[127] = dn / m1;
    fn[0] = 1.0;
    fn[127] = std::exp(-0.5 * dn * dn);
    for (int i = 126; i >= 1; --i) {
      dn = std::sqrt(-2.0 * std::log(vn / dn + std::exp(-0.5 * dn * dn)));
      kn[i + 1] = static_cast<std::int64_t>((dn / tn) * m1);
      tn = dn;
      fn[i] = std::exp(-0.5 * dn * dn);
      wn[i] = dn / m1;
    }
    double de = 7.697117470131487, te = de;
    const double ve = 3.949659822581572e-3;
    const double qe = ve / std::exp(-de);
    ke[0] = static_cast<std::uint64_t>((de / qe) * m2);
    ke[1] = 0;
    we[0] = qe / m2;
    we[255] = de / m2;
    fe[0] = 1.0;
    fe[255] = std::exp(-de);
    for (int i = 254; i >= 1; --i) {
      de = -std::log(ve / de + std::exp(-de));
      ke[i + 1] = static_cast<std::uint64_t>((de / te) * m2);
      te = de;
      fe[i] = std::exp(-de);
      we[i] = de / m2;
    }
  }
};

inline const ZigguratTables& ziggurat() {
  static const ZigguratTables tables;
  return tables;
}

// Marsaglia and Tsang's ziggurat (2000) over any generator G with next(), uniform() and
// uniform_open0(): one 64-bit draw almost always, the layer index and the value from
// different bits of it. The fast path is inline; the rest (wedges and tail, about 1 % of
// draws) out of line, drawing again until it accepts.
template <class G>
[[gnu::noinline]] double ziggurat_normal_slow(G& g, const ZigguratTables& z, std::int64_t hz,
                                              unsigned iz) {
  for (;;) {
    const double x = static_cast<double>(hz) * z.wn[iz];
    if ((hz < 0 ? -hz : hz) < z.kn[iz]) return x;
    if (iz == 0) {  // the tail beyond r
      constexpr double r = 3.442619855899;
      double tx, ty;
      do {
        tx = -std::log(g.uniform_open0()) / r;
        ty = -std::log(g.uniform_open0());
      } while (ty + ty < tx * tx);
      return hz > 0 ? r + tx : -r - tx;
    }
    if (z.fn[iz] + g.uniform() * (z.fn[iz - 1] - z.fn[iz]) < std::exp(-0.5 * x * x)) return x;
    const std::uint64_t bits = g.next();
    hz = static_cast<std::int32_t>(static_cast<std::uint32_t>(bits >> 32));
    iz = bits & 127u;
  }
}

template <class G>
inline double ziggurat_normal(G& g, const ZigguratTables& z) {
  const std::uint64_t bits = g.next();
  const std::int64_t hz = static_cast<std::int32_t>(static_cast<std::uint32_t>(bits >> 32));
  const unsigned iz = bits & 127u;
  if ((hz < 0 ? -hz : hz) < z.kn[iz]) [[likely]]
    return static_cast<double>(hz) * z.wn[iz];
  return ziggurat_normal_slow(g, z, hz, iz);
}

template <class G>
[[gnu::noinline]] double ziggurat_exponential_slow(G& g, const ZigguratTables& z,
                                                   std::uint64_t jz, unsigned iz) {
  for (;;) {
    const double x = static_cast<double>(jz) * z.we[iz];
    if (jz < z.ke[iz]) return x;
    if (iz == 0) return 7.697117470131487 - std::log(g.uniform_open0());
    if (z.fe[iz] + g.uniform() * (z.fe[iz - 1] - z.fe[iz]) < std::exp(-x)) return x;
    const std::uint64_t bits = g.next();
    jz = bits >> 32;
    iz = bits & 255u;
  }
}

template <class G>
inline double ziggurat_exponential(G& g, const ZigguratTables& z) {
  const std::uint64_t bits = g.next();
  const std::uint64_t jz = bits >> 32;
  const unsigned iz = bits & 255u;
  if (jz < z.ke[iz]) [[likely]]
    return static_cast<double>(jz) * z.we[iz];
  return ziggurat_exponential_slow(g, z, jz, iz);
}

inline double Rng::standard_normal() { return ziggurat_normal(*this, ziggurat()); }
inline double Rng::standard_exponential() { return ziggurat_exponential(*this, ziggurat()); }

// Several independent xoshiro256** lanes (state in structure-of-arrays form, so one loop
// step advances all lanes with vector instructions), read through a buffer. Same draws and
// ziggurat samplers as Rng, a different (equally good) stream.
class BlockRng {
 public:
  explicit BlockRng(std::uint64_t seed) {
    std::uint64_t s = seed;
    for (auto& word : state_)
      for (unsigned l = 0; l < kLanes; ++l) word[l] = splitmix64(s);
    refill();
  }

  std::uint64_t next() {
    if (pos_ == kBuffer) [[unlikely]]
      refill();
    return buffer_[pos_++];
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform_open0() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
  // [0, 1) in steps of 2^-32, half a draw: for rejection tests and points in a disk, where
  // 32 bits are plenty.
  double uniform32() {
    if (half_pos_ == 2 * kBuffer) [[unlikely]]
      refill_halves();
    return static_cast<double>(halves_[half_pos_++]) * 0x1.0p-32;
  }
  std::uint32_t below(std::uint32_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * std::uint64_t{n}) >> 32);
  }
  double exponential(double mean) { return mean * standard_exponential(); }
  double gauss() { return standard_normal(); }

  double standard_normal() { return ziggurat_normal(*this, tables_); }
  double standard_exponential() { return ziggurat_exponential(*this, tables_); }

 private:
  static constexpr unsigned kLanes = 4;
  static constexpr unsigned kBuffer = 512;
  // GCC vector extension: one value per lane, split into whatever registers the target has.
  using Lanes = std::uint64_t __attribute__((vector_size(8 * kLanes)));

  // Integer arithmetic only, so the AVX2 and the baseline versions (chosen when the program
  // loads) give the same numbers.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  [[gnu::noinline, gnu::target_clones("avx2", "default")]]
#else
  [[gnu::noinline]]
#endif
  void refill() {
    // rotl(s1 * 5, 7) * 9 with shifts and adds: there is no 64-bit vector multiply before
    // AVX-512.
    Lanes s0 = state_[0], s1 = state_[1], s2 = state_[2], s3 = state_[3];
    for (unsigned i = 0; i < kBuffer; i += kLanes) {
      const Lanes m = s1 + (s1 << 2);
      const Lanes r = (m << 7) | (m >> 57);
      const Lanes out = r + (r << 3);
      std::memcpy(&buffer_[i], &out, sizeof out);
      const Lanes t = s1 << 17;
      s2 ^= s0;
      s3 ^= s1;
      s1 ^= s2;
      s0 ^= s3;
      s2 ^= t;
      s3 = (s3 << 45) | (s3 >> 19);
    }
    state_[0] = s0;
    state_[1] = s1;
    state_[2] = s2;
    state_[3] = s3;
    pos_ = 0;
  }

  // The 32-bit draws come from whole buffers of 64-bit ones, so that uniform32 has no
  // alternating branch.
  [[gnu::noinline]] void refill_halves() {
    for (unsigned i = 0; i < kBuffer; ++i) {
      const std::uint64_t bits = next();
      halves_[2 * i] = static_cast<std::uint32_t>(bits);
      halves_[2 * i + 1] = static_cast<std::uint32_t>(bits >> 32);
    }
    half_pos_ = 0;
  }

  Lanes state_[4];
  alignas(64) std::uint64_t buffer_[kBuffer];
  unsigned pos_ = kBuffer;
  std::uint32_t halves_[2 * kBuffer];
  unsigned half_pos_ = 2 * kBuffer;
  const ZigguratTables& tables_ = ziggurat();
};

}  // namespace petdaq::sim
