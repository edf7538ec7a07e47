// Fast deterministic random numbers for generated weights: one independent stream per
// (seed, tensor name, row), so the output does not depend on the thread count or the order in
// which rows are produced.
#pragma once

#include <cstdint>
#include <string_view>

namespace minfer::quantize {

/// SplitMix64 step (Steele, Lea, Flood 2014; the seeding generator recommended for xoshiro).
inline uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// xoshiro256+ (Blackman & Vigna, "Scrambled linear pseudorandom number generators", 2021). Its
/// lowest bits are weakly linear; fill_normal sums all four 16-bit lanes of an output, and random
/// weights need nothing stronger.
class Xoshiro256p {
 public:
  explicit Xoshiro256p(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t r = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return r;
  }

 private:
  uint64_t s_[4];
};

/// The stream seed of row `row` of tensor `name`: FNV-1a of the name mixed with seed and row.
uint64_t row_stream_seed(uint64_t seed, std::string_view name, int64_t row);

/// x[0..n) ~ approximately N(0, stddev^2): each value is the Irwin-Hall sum of the four 16-bit
/// lanes of one xoshiro256+ output, centred and scaled to unit variance (bounded at +-3.46
/// stddev, kurtosis -0.3; plenty for random weights, and ~1 ns per value).
void fill_normal(float* x, int64_t n, float stddev, uint64_t stream_seed);

}  // namespace minfer::quantize
