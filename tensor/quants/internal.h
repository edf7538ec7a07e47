// Internal interface between the quants/*.cpp files and the public dispatch in quants.cpp. Not
// installed; tests include it to compare the scalar and SIMD paths.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/quants_blocks.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace minfer::quants {

// Every kernel takes an element count `n` that is a multiple of its block size. Inputs are
// trusted here; quants.cpp validates.
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
using DotFn = float (*)(int64_t n, const void* x, const void* y);

/// Round half to even, as ggml's nearest_int; the argument is clamped to +-2^22 first so that
/// huge ratios cannot overflow.
inline int nearest_int(float v) {
  v = v > 4194303.f ? 4194303.f : (v < -4194303.f ? -4194303.f : v);
  float t = v + 12582912.f;  // 1.5 * 2^23: the sum's low mantissa bits hold round(v)
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

/// binary16 -> f32 for block scales: the F16C instruction when available (identical results to
/// f16_to_f32 for every non-NaN input; the tests check all 65536 patterns).
inline float f16(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

/// f32 -> binary16 (round to nearest even) for block scales, F16C when available (identical to
/// f32_to_f16 except for NaN payloads).
inline uint16_t to_f16(float v) {
#if defined(__F16C__)
  return static_cast<uint16_t>(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  return f32_to_f16(v);
#endif
}

// ---- legacy.cpp: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1
void dequantize_q4_0(const void* src, float* dst, int64_t n);
void dequantize_q4_1(const void* src, float* dst, int64_t n);
void dequantize_q5_0(const void* src, float* dst, int64_t n);
void dequantize_q5_1(const void* src, float* dst, int64_t n);
void dequantize_q8_0(const void* src, float* dst, int64_t n);
void dequantize_q8_1(const void* src, float* dst, int64_t n);

// ---- legacy_quantize.cpp: scale searches for the 32-element formats
void quantize_q4_0(const float* src, void* dst, int64_t n);
void quantize_q4_1(const float* src, void* dst, int64_t n);
void quantize_q5_0(const float* src, void* dst, int64_t n);
void quantize_q5_1(const float* src, void* dst, int64_t n);
void quantize_q8_0(const float* src, void* dst, int64_t n);
void quantize_q8_1(const float* src, void* dst, int64_t n);

// ---- activations.cpp: ggml's quantize_row_q8_0/q8_1/q8_K reference encodings (absmax scale)
void quantize_act_q8_0(const float* src, void* dst, int64_t n);
void quantize_act_q8_1(const float* src, void* dst, int64_t n);
void quantize_act_q8_k(const float* src, void* dst, int64_t n);
// Scalar versions of the same (the SIMD ones must match them bit for bit).
void quantize_act_q8_0_scalar(const float* src, void* dst, int64_t n);
void quantize_act_q8_1_scalar(const float* src, void* dst, int64_t n);
void quantize_act_q8_k_scalar(const float* src, void* dst, int64_t n);

// ---- kquants.cpp: Q2_K..Q8_K decoders
void dequantize_q2_k(const void* src, float* dst, int64_t n);
void dequantize_q3_k(const void* src, float* dst, int64_t n);
void dequantize_q4_k(const void* src, float* dst, int64_t n);
void dequantize_q5_k(const void* src, float* dst, int64_t n);
void dequantize_q6_k(const void* src, float* dst, int64_t n);
void dequantize_q8_k(const void* src, float* dst, int64_t n);

// ---- kquants_quantize.cpp: K-quant scale searches
void quantize_q2_k(const float* src, void* dst, int64_t n);
void quantize_q3_k(const float* src, void* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);
void quantize_q8_k(const float* src, void* dst, int64_t n);

/// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K `scales` array
/// (ggml's get_scale_min_k4).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

/// The 16 6-bit Q3_K scales (still biased by +32) unpacked from the 12-byte array.
inline void unpack_q3_k_scales(const uint8_t* s, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>(lo | (hi << 4));
  }
}

// ---- float.cpp: F32/F16/BF16/I32 rows
void dequantize_f32(const void* src, float* dst, int64_t n);
void dequantize_f16(const void* src, float* dst, int64_t n);
void dequantize_bf16(const void* src, float* dst, int64_t n);
void dequantize_i32(const void* src, float* dst, int64_t n);
void quantize_f32(const float* src, void* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
void f32_to_f16_row_scalar(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_row_scalar(const uint16_t* src, float* dst, int64_t n);

// ---- dot_scalar.cpp: reference dot products, weight type x vec_dot_type(weight type)
float dot_f32_scalar(int64_t n, const void* x, const void* y);
float dot_f16_scalar(int64_t n, const void* x, const void* y);
float dot_bf16_scalar(int64_t n, const void* x, const void* y);
float dot_q4_0_scalar(int64_t n, const void* x, const void* y);
float dot_q4_1_scalar(int64_t n, const void* x, const void* y);
float dot_q5_0_scalar(int64_t n, const void* x, const void* y);
float dot_q5_1_scalar(int64_t n, const void* x, const void* y);
float dot_q8_0_scalar(int64_t n, const void* x, const void* y);
float dot_q8_1_scalar(int64_t n, const void* x, const void* y);
float dot_q2_k_scalar(int64_t n, const void* x, const void* y);
float dot_q3_k_scalar(int64_t n, const void* x, const void* y);
float dot_q4_k_scalar(int64_t n, const void* x, const void* y);
float dot_q5_k_scalar(int64_t n, const void* x, const void* y);
float dot_q6_k_scalar(int64_t n, const void* x, const void* y);
float dot_q8_k_scalar(int64_t n, const void* x, const void* y);

// ---- dot_avx2.cpp: the same products with AVX2 (defined only when the build enables AVX2)
float dot_f32_avx2(int64_t n, const void* x, const void* y);
float dot_f16_avx2(int64_t n, const void* x, const void* y);
float dot_bf16_avx2(int64_t n, const void* x, const void* y);
float dot_q4_0_avx2(int64_t n, const void* x, const void* y);
float dot_q4_1_avx2(int64_t n, const void* x, const void* y);
float dot_q5_0_avx2(int64_t n, const void* x, const void* y);
float dot_q5_1_avx2(int64_t n, const void* x, const void* y);
float dot_q8_0_avx2(int64_t n, const void* x, const void* y);
float dot_q2_k_avx2(int64_t n, const void* x, const void* y);
float dot_q3_k_avx2(int64_t n, const void* x, const void* y);
float dot_q4_k_avx2(int64_t n, const void* x, const void* y);
float dot_q5_k_avx2(int64_t n, const void* x, const void* y);
float dot_q6_k_avx2(int64_t n, const void* x, const void* y);
float dot_q8_k_avx2(int64_t n, const void* x, const void* y);

/// The scalar dot for `weight_type`, or nullptr.
DotFn dot_scalar_fn(DType weight_type);
/// The AVX2 dot for `weight_type`, or nullptr (always nullptr in a build without AVX2).
DotFn dot_avx2_fn(DType weight_type);

/// Scalar reference of vec_dot (same contract), for tests and benchmarks.
float vec_dot_scalar(DType weight_type, int64_t n, const void* x, const void* y);

}  // namespace minfer::quants
