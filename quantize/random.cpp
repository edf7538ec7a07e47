#include "quantize/random.h"

namespace minfer::quantize {

uint64_t row_stream_seed(uint64_t seed, std::string_view name, int64_t row) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  uint64_t x = seed ^ h;
  const uint64_t a = splitmix64(x);
  x = a ^ static_cast<uint64_t>(row) * 0xD1B54A32D192ED03ull;
  return splitmix64(x);
}

void fill_normal(float* x, int64_t n, float stddev, uint64_t stream_seed) {
  // Sum of four U{0..65535}: mean 4 * 32767.5, variance 4 * (65536^2 - 1) / 12.
  constexpr float kMean = 4 * 32767.5f;
  constexpr float kInvStd = 1.0f / 37837.23f;
  const float scale = stddev * kInvStd;
  Xoshiro256p g(stream_seed);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = g.next();
    const uint32_t s = static_cast<uint32_t>(r & 0xFFFF) + static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                       static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
    x[i] = (static_cast<float>(s) - kMean) * scale;
  }
}

}  // namespace minfer::quantize
