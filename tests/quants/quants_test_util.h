// Helpers shared by the quants tests: seeded random generators, NaN poisoning and an
// independent decoder written from the GGUF block specs. The decoder reads raw bytes at fixed
// offsets (not the library's structs), extracts bits by element index, converts f16 with the
// F16C instruction (not tensor/fp16.h), and forces every f32 operation to round separately.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace minfer::test {

/// Seed of this run: $MINFER_TEST_SEED or a fresh random one (printed by the tests).
inline uint32_t test_seed() {
  static const uint32_t seed = [] {
    if (const char* s = std::getenv("MINFER_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
    return std::random_device{}();
  }();
  return seed;
}

// The F16C instructions, as an independent f16 reference (enabled per function so that the
// test builds for any -march; the machine must have F16C).
__attribute__((target("f16c"))) inline float hw_f16(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) inline uint16_t hw_to_f16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

// f32 operations that cannot be fused or reassociated by the compiler.
inline float mulr(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float subr(float a, float b) {
  volatile float r = a - b;
  return r;
}

inline uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline void wr16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline int bit(const uint8_t* p, int i) { return (p[i / 8] >> (i % 8)) & 1; }

/// One decoded element: value = (step * q) - offset, each operation rounded to f32. q is the
/// integer level in [qlo, qhi] (offsets of the symmetric formats already removed).
struct Elem {
  float step;
  float offset;
  int q, qlo, qhi;
  float value() const { return subr(mulr(step, static_cast<float>(q)), offset); }
};

inline int block_bytes(DType t) {
  switch (t) {
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q5_1: return 24;
    case DType::Q8_0: return 34;
    case DType::Q8_1: return 36;
    case DType::Q2_K: return 84;
    case DType::Q3_K: return 110;
    case DType::Q4_K: return 144;
    case DType::Q5_K: return 176;
    case DType::Q6_K: return 210;
    case DType::Q8_K: return 292;
    default: return 0;
  }
}

inline int block_elems(DType t) {
  switch (t) {
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::Q8_K:
      return 256;
    default:
      return 32;
  }
}

// The 4-bit-low/high split used by the 32-element formats: element e < 16 is the low nibble of
// byte e, element e >= 16 the high nibble of byte e - 16.
inline int nibble32(const uint8_t* qs, int e) { return e < 16 ? (qs[e] % 16) : (qs[e - 16] / 16); }

// Sub-block k (0..7) 6-bit scale or min of Q4_K/Q5_K from the 12 packed bytes (spec:
// get_scale_min_k4): the first four scales/mins are the low 6 bits of bytes 0-3 / 4-7; the last
// four take their low 4 bits from bytes 8-11 (scale: low nibble, min: high nibble) and their top
// 2 bits from the top 2 bits of bytes 0-3 (scale) / 4-7 (min).
inline int k4_scale(const uint8_t* s, int k) { return k < 4 ? s[k] % 64 : (s[k + 4] % 16) + 16 * (s[k - 4] / 64); }
inline int k4_min(const uint8_t* s, int k) { return k < 4 ? s[k + 4] % 64 : (s[k + 4] / 16) + 16 * (s[k] / 64); }

// Q3_K scale j (0..15), 6 bits biased by 32: low 4 bits are nibble j of bytes 0-7 (low nibbles
// for j < 8, high nibbles for j >= 8), high 2 bits are the 2-bit field j of bytes 8-11 read as
// byte 8 + j % 4, bits 2 * (j / 4).
inline int q3k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] % 16 : s[j - 8] / 16;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) % 4;
  return lo + 16 * hi - 32;
}

/// Element e of the block at `b` (raw bytes) of block type t.
inline Elem spec_elem(DType t, const uint8_t* b, int e) {
  switch (t) {
    case DType::Q4_0: return {hw_f16(rd16(b)), 0.f, nibble32(b + 2, e) - 8, -8, 7};
    case DType::Q4_1: return {hw_f16(rd16(b)), -hw_f16(rd16(b + 2)), nibble32(b + 4, e), 0, 15};
    case DType::Q5_0: return {hw_f16(rd16(b)), 0.f, nibble32(b + 6, e) + 16 * bit(b + 2, e) - 16, -16, 15};
    case DType::Q5_1: return {hw_f16(rd16(b)), -hw_f16(rd16(b + 2)), nibble32(b + 8, e) + 16 * bit(b + 4, e), 0, 31};
    case DType::Q8_0: return {hw_f16(rd16(b)), 0.f, static_cast<int8_t>(b[2 + e]), -128, 127};
    case DType::Q8_1: return {hw_f16(rd16(b)), 0.f, static_cast<int8_t>(b[4 + e]), -128, 127};
    case DType::Q2_K: {
      // scales[16] @0, qs[64] @16, d @80, dmin @82. 2-bit field: byte 32*(e/128) + e%32,
      // position (e%128)/32.
      const int sc = b[e / 16];
      const int q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) % 4;
      return {mulr(hw_f16(rd16(b + 80)), static_cast<float>(sc % 16)),
              mulr(hw_f16(rd16(b + 82)), static_cast<float>(sc / 16)), q, 0, 3};
    }
    case DType::Q3_K: {
      // hmask[32] @0, qs[64] @32, scales[12] @96, d @108. High bit of element e: bit e/32 of
      // hmask byte e%32; a clear high bit subtracts 4.
      const int lo = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) % 4;
      const int hb = (b[e % 32] >> (e / 32)) % 2;
      return {mulr(hw_f16(rd16(b + 108)), static_cast<float>(q3k_scale(b + 96, e / 16))), 0.f,
              lo - 4 * (1 - hb), -4, 3};
    }
    case DType::Q4_K: {
      // d @0, dmin @2, scales[12] @4, qs[128] @16. Element e: byte 32*(e/64) + e%32, low nibble
      // for the first 32 of each 64.
      const uint8_t byte = b[16 + 32 * (e / 64) + e % 32];
      const int q = (e % 64) < 32 ? byte % 16 : byte / 16;
      return {mulr(hw_f16(rd16(b)), static_cast<float>(k4_scale(b + 4, e / 32))),
              mulr(hw_f16(rd16(b + 2)), static_cast<float>(k4_min(b + 4, e / 32))), q, 0, 15};
    }
    case DType::Q5_K: {
      // d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48. Fifth bit: bit e/32 of qh[e%32].
      const uint8_t byte = b[48 + 32 * (e / 64) + e % 32];
      const int q = ((e % 64) < 32 ? byte % 16 : byte / 16) + 16 * ((b[16 + e % 32] >> (e / 32)) % 2);
      return {mulr(hw_f16(rd16(b)), static_cast<float>(k4_scale(b + 4, e / 32))),
              mulr(hw_f16(rd16(b + 2)), static_cast<float>(k4_min(b + 4, e / 32))), q, 0, 31};
    }
    case DType::Q6_K: {
      // ql[128] @0, qh[64] @128, scales[16] int8 @192, d @208. Per 128 elements: low 4 bits in
      // 64 ql bytes (low nibbles for the first 64), top 2 bits in 32 qh bytes (2-bit field
      // (e%128)/32).
      const int w = e % 128, half = e / 128;
      const uint8_t lb = b[64 * half + w % 64];
      const int lo = w < 64 ? lb % 16 : lb / 16;
      const int hi = (b[128 + 32 * half + w % 32] >> (2 * (w / 32))) % 4;
      return {mulr(hw_f16(rd16(b + 208)), static_cast<float>(static_cast<int8_t>(b[192 + e / 16]))), 0.f,
              lo + 16 * hi - 32, -32, 31};
    }
    case DType::Q8_K: {
      float d;
      std::memcpy(&d, b, 4);
      return {d, 0.f, static_cast<int8_t>(b[4 + e]), -128, 127};
    }
    default:
      std::abort();
  }
}

/// Spec decode of a whole row of block type t.
inline std::vector<float> spec_decode(DType t, const void* row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const auto* p = static_cast<const uint8_t*>(row);
  const int qk = block_elems(t), bs = block_bytes(t);
  for (int64_t i = 0; i < n; ++i) out[i] = spec_elem(t, p + (i / qk) * bs, static_cast<int>(i % qk)).value();
  return out;
}

inline void poison(std::vector<float>& v) { std::fill(v.begin(), v.end(), std::numeric_limits<float>::quiet_NaN()); }

/// A random finite f16 bit pattern (any exponent but 31).
inline uint16_t random_finite_f16(std::mt19937& rng) {
  for (;;) {
    const uint16_t h = static_cast<uint16_t>(rng());
    if ((h & 0x7C00) != 0x7C00) return h;
  }
}

/// A random f16 scale with a modest positive magnitude in [lo, hi).
inline uint16_t random_scale_f16(std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  return hw_to_f16(u(rng));
}

/// Weight-like data: N(0, sigma) with outliers (0.5% of the values scaled by 4..12) and, in 20%
/// of the 32-element groups, a random offset so that min/max formats see asymmetric blocks.
inline std::vector<float> weight_like(std::mt19937& rng, int64_t n, float sigma = 1.f) {
  std::normal_distribution<float> g(0.f, sigma);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  float shift = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 32 == 0) shift = u(rng) < 0.2f ? g(rng) * 0.5f : 0.f;
    x[i] = g(rng) + shift;
    if (u(rng) < 0.005f) x[i] *= 4.f + 8.f * u(rng);
  }
  return x;
}

inline std::string seed_note() { return "seed " + std::to_string(test_seed()) + " (set MINFER_TEST_SEED to replay)"; }

}  // namespace minfer::test
