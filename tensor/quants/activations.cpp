// Activation encoders for the dot products: ggml's quantize_row_q8_0_ref / q8_1_ref / q8_K_ref
// (absmax scale, no search), with an AVX2 path that reproduces them bit for bit: roundf (half
// away from zero) for Q8_0/Q8_1, round-half-even (nearest_int) for Q8_K, and the same f32
// operations in the same order.
//
// A block holding inf or NaN gets a NaN scale and zero quants, so every dot product that
// touches it returns NaN instead of garbage.
#include <cmath>
#include <limits>

#include "tensor/quants/internal.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace minfer::quants {

namespace {

constexpr uint16_t kF16NaN = 0x7E00;

inline bool is_finite(float v) { return std::fabs(v) <= std::numeric_limits<float>::max(); }

// One 32-element block, scalar. Returns the integer sum of the quants.
int q8_0_block_scalar(const float* x, uint16_t* dbits, int8_t* qs) {
  float amax = 0;
  bool finite = true;
  for (int j = 0; j < kQK8_0; ++j) {
    finite &= is_finite(x[j]);
    amax = std::fmax(amax, std::fabs(x[j]));
  }
  if (!finite) {
    *dbits = kF16NaN;
    std::memset(qs, 0, kQK8_0);
    return 0;
  }
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  *dbits = to_f16(d);
  int sum = 0;
  for (int j = 0; j < kQK8_0; ++j) {
    qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    sum += qs[j];
  }
  return sum;
}

}  // namespace

void quantize_act_q8_0_scalar(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < nb; ++i) q8_0_block_scalar(src + i * kQK8_0, &y[i].d, y[i].qs);
}

void quantize_act_q8_1_scalar(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK8_1;
    const int sum = q8_0_block_scalar(x, &y[i].d, y[i].qs);
    if (y[i].d == kF16NaN) {
      y[i].s = kF16NaN;
      continue;
    }
    float amax = 0;  // recomputed to use the unrounded f32 scale, as ggml does
    for (int j = 0; j < kQK8_1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    y[i].s = to_f16(static_cast<float>(sum) * (amax / 127.f));
  }
}

void quantize_act_q8_k_scalar(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQKK;
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQKK) {
    float amax = 0, vmax = 0;
    bool finite = true;
    for (int j = 0; j < kQKK; ++j) {
      finite &= is_finite(src[j]);
      const float a = std::fabs(src[j]);
      if (a > amax) {
        amax = a;
        vmax = src[j];
      }
    }
    if (!finite || amax == 0.f) {
      y[i].d = finite ? 0.f : std::numeric_limits<float>::quiet_NaN();
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      std::memset(y[i].bsums, 0, sizeof y[i].bsums);
      continue;
    }
    const float iscale = -127.f / vmax;
    for (int j = 0; j < kQKK; ++j) {
      const int v = nearest_int(iscale * src[j]);
      y[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < kQKK / 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += y[i].qs[16 * g + j];
      y[i].bsums[g] = static_cast<int16_t>(s);
    }
    y[i].d = 1.f / iscale;
  }
}

#if defined(__AVX2__)

namespace {

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// roundf: round to integer, halfway cases away from zero.
inline __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.f));
  const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.f), _mm256_sub_ps(v, t));
  const __m256 up = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                  _mm256_or_ps(sign, _mm256_set1_ps(1.f)));
  return _mm256_add_ps(t, up);
}

// Packs four int32 vectors (32 lanes in order) into 32 int8.
inline __m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // lanes: a0-3 b0-3 | a4-7 b4-7
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Returns the integer sum of the quants; writes NaN scale for non-finite blocks.
int q8_0_block_avx2(const float* x, uint16_t* dbits, int8_t* qs) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 fmax = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 v[4];
  __m256 amaxv = _mm256_setzero_ps();
  __m256 bad = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    const __m256 a = _mm256_and_ps(v[k], abs_mask);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, fmax, _CMP_NLE_UQ));
    amaxv = _mm256_max_ps(amaxv, a);
  }
  if (_mm256_movemask_ps(bad)) {
    *dbits = kF16NaN;
    std::memset(qs, 0, kQK8_0);
    return 0;
  }
  const float amax = hmax8(amaxv);
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  *dbits = to_f16(d);
  const __m256 idv = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v[k], idv)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
  return hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

}  // namespace

void quantize_act_q8_0(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < nb; ++i) q8_0_block_avx2(src + i * kQK8_0, &y[i].d, y[i].qs);
}

void quantize_act_q8_1(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK8_1;
    const int sum = q8_0_block_avx2(x, &y[i].d, y[i].qs);
    if (y[i].d == kF16NaN) {
      y[i].s = kF16NaN;
      continue;
    }
    float amax = 0;
    for (int j = 0; j < kQK8_1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    y[i].s = to_f16(static_cast<float>(sum) * (amax / 127.f));
  }
}

void quantize_act_q8_k(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQKK;
  auto* y = static_cast<BlockQ8_K*>(dst);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 fmax = _mm256_set1_ps(std::numeric_limits<float>::max());
  for (int64_t i = 0; i < nb; ++i, src += kQKK) {
    __m256 amaxv = _mm256_setzero_ps();
    __m256 bad = _mm256_setzero_ps();
    for (int k = 0; k < kQKK; k += 8) {
      const __m256 a = _mm256_and_ps(_mm256_loadu_ps(src + k), abs_mask);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, fmax, _CMP_NLE_UQ));
      amaxv = _mm256_max_ps(amaxv, a);
    }
    const float amax = hmax8(amaxv);
    const bool finite = _mm256_movemask_ps(bad) == 0;
    if (!finite || amax == 0.f) {
      y[i].d = finite ? 0.f : std::numeric_limits<float>::quiet_NaN();
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      std::memset(y[i].bsums, 0, sizeof y[i].bsums);
      continue;
    }
    // ggml takes the sign from the first element of largest magnitude.
    float vmax = 0;
    const __m256 amaxb = _mm256_set1_ps(amax);
    for (int k = 0; k < kQKK; k += 8) {
      const __m256 x = _mm256_loadu_ps(src + k);
      const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(x, abs_mask), amaxb, _CMP_EQ_OQ));
      if (m) {
        vmax = src[k + __builtin_ctz(static_cast<unsigned>(m))];
        break;
      }
    }
    const float iscale = -127.f / vmax;
    const __m256 isv = _mm256_set1_ps(iscale);
    const __m256i max127 = _mm256_set1_epi32(127);
    for (int k = 0; k < kQKK; k += 32) {
      __m256i q[4];
      for (int u = 0; u < 4; ++u)  // cvtps rounds half to even, like nearest_int
        q[u] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + k + 8 * u), isv)), max127);
      const __m256i packed = pack_i32_to_i8(q[0], q[1], q[2], q[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + k), packed);
      // Sums of 16: widen to int16, pairwise add to int32, then fold.
      const __m256i w = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), packed), _mm256_set1_epi16(1));
      // w holds 8 sums of 4 consecutive quants: lanes 0-3 -> first 16, lanes 4-7 -> second 16.
      alignas(32) int32_t s4[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(s4), w);
      y[i].bsums[k / 16] = static_cast<int16_t>(s4[0] + s4[1] + s4[2] + s4[3]);
      y[i].bsums[k / 16 + 1] = static_cast<int16_t>(s4[4] + s4[5] + s4[6] + s4[7]);
    }
    y[i].d = 1.f / iscale;
  }
}

#else

void quantize_act_q8_0(const float* src, void* dst, int64_t n) { quantize_act_q8_0_scalar(src, dst, n); }
void quantize_act_q8_1(const float* src, void* dst, int64_t n) { quantize_act_q8_1_scalar(src, dst, n); }
void quantize_act_q8_k(const float* src, void* dst, int64_t n) { quantize_act_q8_k_scalar(src, dst, n); }

#endif

}  // namespace minfer::quants
