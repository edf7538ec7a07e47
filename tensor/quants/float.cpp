// Rows of the float storage types: F32 copy, F16 (F16C when available), BF16, I32 widening.
// The F16C instructions round to nearest even and keep subnormals exactly like the portable
// conversions of tensor/fp16.h; they differ only in the payload bits of NaNs.
#include <cstring>

#include "tensor/quants/internal.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define MINFER_QUANTS_F16C 1
#endif

namespace minfer::quants {

void f32_to_f16_row_scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void f16_to_f32_row_scalar(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void dequantize_f32(const void* src, float* dst, int64_t n) {
  if (n > 0 && src != dst) std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_f32(const float* src, void* dst, int64_t n) {
  if (n > 0 && src != dst) std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_i32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const int32_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(x[i]);
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  int64_t i = 0;
#if MINFER_QUANTS_F16C
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(x[i]);
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
#if MINFER_QUANTS_F16C
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) y[i] = f32_to_f16(src[i]);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  int64_t i = 0;
#if MINFER_QUANTS_F16C
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
#endif
  for (; i < n; ++i) dst[i] = bf16_to_f32(x[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
#if MINFER_QUANTS_F16C
  // Same as f32_to_bf16: add 0x7FFF + lsb and truncate; NaN keeps its top bits and gets the
  // quiet bit.
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf = _mm256_set1_epi32(0x7F800000);
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
    // Narrow 8 x u32 (all < 2^16) to 8 x u16.
    const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm_packus_epi32(lo, hi));
  }
#endif
  for (; i < n; ++i) y[i] = f32_to_bf16(src[i]);
}

}  // namespace minfer::quants
