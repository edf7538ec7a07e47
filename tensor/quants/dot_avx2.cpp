// AVX2 dot products. The per-block integer sums are exact and equal the scalar ones:
// unsigned levels (0..2^b - 1) are multiplied with the signed int8 activations by
// VPMADDUBSW (no saturation is possible: |level * q8 * 2| <= 63 * 128 * 2 < 2^15), the level
// offset (8, 16, 32, 4) is subtracted as offset * sum(q8), and sub-block scales are applied
// with VPMADDWD. Scales are applied in f32 per block with FMA into 8-lane accumulators, so
// the final sum differs from the scalar path only by f32 rounding.
#include "tensor/quants/internal.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace minfer::quants {

#if defined(__AVX2__)

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 bytes of packed nibbles -> 32 bytes: low nibbles first, then the high nibbles.
inline __m256i nibbles_32(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// The 32 bits of qh -> 32 bytes, 0x10 where bit e is set.
inline __m256i high_bits_32(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)), shuf);
  b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all bits but bit e%8
  return _mm256_and_si256(_mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

// Pairwise int16 sums of (u - offset) * q for unsigned levels u and int8 q.
inline __m256i mul_offset(__m256i u, __m256i q, int offset) {
  return _mm256_sub_epi16(_mm256_maddubs_epi16(u, q), _mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(offset)), q));
}

inline __m256i sum_pairs(__m256i v16) { return _mm256_madd_epi16(v16, _mm256_set1_epi16(1)); }

// int16 scale vector: lanes 0-7 (first 16 elements) s0, lanes 8-15 s1.
inline __m256i scale_pair(int s0, int s1) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s1)), _mm_set1_epi16(static_cast<short>(s0)));
}

}  // namespace

float dot_f32_avx2(int64_t n, const void* xv, const void* yv) {
  const auto* x = static_cast<const float*>(xv);
  const auto* y = static_cast<const float*>(yv);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

float dot_f16_avx2(int64_t n, const void* xv, const void* yv) {
  const auto* x = static_cast<const uint16_t*>(xv);
  const auto* y = static_cast<const float*>(yv);
  const auto ld = [x](int64_t i) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))); };
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(ld(i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(ld(i + 8), _mm256_loadu_ps(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(ld(i + 16), _mm256_loadu_ps(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(ld(i + 24), _mm256_loadu_ps(y + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(ld(i), _mm256_loadu_ps(y + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += f16_to_f32(x[i]) * y[i];
  return s;
}

float dot_bf16_avx2(int64_t n, const void* xv, const void* yv) {
  const auto* x = static_cast<const uint16_t*>(xv);
  const auto* y = static_cast<const float*>(yv);
  const auto ld = [x](int64_t i) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  };
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(ld(i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(ld(i + 8), _mm256_loadu_ps(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(ld(i + 16), _mm256_loadu_ps(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(ld(i + 24), _mm256_loadu_ps(y + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(ld(i), _mm256_loadu_ps(y + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += bf16_to_f32(x[i]) * y[i];
  return s;
}

float dot_q4_0_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ4_0*>(xv);
  const auto* y = static_cast<const BlockQ8_0*>(yv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i p = sum_pairs(mul_offset(nibbles_32(x[i].qs), load32(y[i].qs), 8));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc);
  }
  return hsum(acc);
}

float dot_q5_0_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ5_0*>(xv);
  const auto* y = static_cast<const BlockQ8_0*>(yv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i u = _mm256_or_si256(nibbles_32(x[i].qs), high_bits_32(x[i].qh));
    const __m256i p = sum_pairs(mul_offset(u, load32(y[i].qs), 16));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc);
  }
  return hsum(acc);
}

float dot_q4_1_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ4_1*>(xv);
  const auto* y = static_cast<const BlockQ8_1*>(yv);
  const __m256i ones8 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i q = load32(y[i].qs);
    const __m256i p = sum_pairs(_mm256_maddubs_epi16(nibbles_32(x[i].qs), q));
    const __m256i s = sum_pairs(_mm256_maddubs_epi16(ones8, q));
    const float dy = f16(y[i].d);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * dy), _mm256_cvtepi32_ps(p), acc);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].m) * dy), _mm256_cvtepi32_ps(s), acc);
  }
  return hsum(acc);
}

float dot_q5_1_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ5_1*>(xv);
  const auto* y = static_cast<const BlockQ8_1*>(yv);
  const __m256i ones8 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i q = load32(y[i].qs);
    const __m256i u = _mm256_or_si256(nibbles_32(x[i].qs), high_bits_32(x[i].qh));
    const __m256i p = sum_pairs(_mm256_maddubs_epi16(u, q));
    const __m256i s = sum_pairs(_mm256_maddubs_epi16(ones8, q));
    const float dy = f16(y[i].d);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * dy), _mm256_cvtepi32_ps(p), acc);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].m) * dy), _mm256_cvtepi32_ps(s), acc);
  }
  return hsum(acc);
}

namespace {

// Exact int8 x int8 dot of 32 values as 8 int32 partial sums (sign-extends, so -128 is fine).
inline __m256i dot_i8x32(const int8_t* a, const int8_t* b) {
  const __m256i va = load32(a), vb = load32(b);
  const __m256i lo = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(va)),
                                       _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vb)));
  const __m256i hi = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(va, 1)),
                                       _mm256_cvtepi8_epi16(_mm256_extracti128_si256(vb, 1)));
  return _mm256_add_epi32(lo, hi);
}

}  // namespace

float dot_q8_0_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ8_0*>(xv);
  const auto* y = static_cast<const BlockQ8_0*>(yv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i)
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(dot_i8x32(x[i].qs, y[i].qs)), acc);
  return hsum(acc);
}

float dot_q8_k_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < kQKK; k += 32) s = _mm256_add_epi32(s, dot_i8x32(x[i].qs + k, y[i].qs + k));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(x[i].d * y[i].d), _mm256_cvtepi32_ps(s), acc);
  }
  return hsum(acc);
}

float dot_q2_k_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ2_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* sc = x[i].scales;
    int summ = 0;
    for (int j = 0; j < 16; ++j) summ += (sc[j] >> 4) * y[i].bsums[j];
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = load32(x[i].qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        const int g = 4 * h + s;  // 32-element group, sub-blocks 2g and 2g + 1
        const __m256i u = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        const __m256i p = _mm256_maddubs_epi16(u, load32(y[i].qs + 32 * g));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc[2 * g] & 0xF, sc[2 * g + 1] & 0xF)));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    acc_min += (y[i].d * f16(x[i].dmin)) * static_cast<float>(summ);
  }
  return hsum(acc) - acc_min;
}

float dot_q3_k_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ3_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    int8_t sc[16];
    unpack_q3_k_scales(x[i].scales, sc);
    const __m256i hm = load32(x[i].hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = load32(x[i].qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        const int g = 4 * h + s;
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, g), m1), 2);
        const __m256i p = mul_offset(_mm256_or_si256(lo, hb), load32(y[i].qs + 32 * g), 4);
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc[2 * g] - 32, sc[2 * g + 1] - 32)));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

float dot_q4_k_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ4_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], mn[8];
    int summ = 0;
    for (int j = 0; j < 8; ++j) {
      get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
      summ += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = load32(x[i].qs + 32 * c);
      const __m256i pl = _mm256_maddubs_epi16(_mm256_and_si256(bits, m4), load32(y[i].qs + 64 * c));
      const __m256i ph = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), load32(y[i].qs + 64 * c + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * c])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * c + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    acc_min += (y[i].d * f16(x[i].dmin)) * static_cast<float>(summ);
  }
  return hsum(acc) - acc_min;
}

float dot_q5_k_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ5_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], mn[8];
    int summ = 0;
    for (int j = 0; j < 8; ++j) {
      get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
      summ += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    const __m256i hb = load32(x[i].qh);
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = load32(x[i].qs + 32 * c);
      const __m256i hl = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * c), m1), 4);
      const __m256i hh = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * c + 1), m1), 4);
      const __m256i ul = _mm256_or_si256(_mm256_and_si256(bits, m4), hl);
      const __m256i uh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hh);
      const __m256i pl = _mm256_maddubs_epi16(ul, load32(y[i].qs + 64 * c));
      const __m256i ph = _mm256_maddubs_epi16(uh, load32(y[i].qs + 64 * c + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * c])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * c + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    acc_min += (y[i].d * f16(x[i].dmin)) * static_cast<float>(summ);
  }
  return hsum(acc) - acc_min;
}

float dot_q6_k_avx2(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ6_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* sc = x[i].scales;
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load32(x[i].ql + 64 * h), l1 = load32(x[i].ql + 64 * h + 32);
      const __m256i hb = load32(x[i].qh + 32 * h);
      const auto high = [&](int s) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * s), m2), 4); };
      const __m256i u[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, m4), high(0)),
          _mm256_or_si256(_mm256_and_si256(l1, m4), high(1)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), high(2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), high(3)),
      };
      for (int k = 0; k < 4; ++k) {
        const int g = 4 * h + k;
        const __m256i p = mul_offset(u[k], load32(y[i].qs + 32 * g), 32);
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc[2 * g], sc[2 * g + 1])));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

DotFn dot_avx2_fn(DType t) {
  switch (t) {
    case DType::F32: return dot_f32_avx2;
    case DType::F16: return dot_f16_avx2;
    case DType::BF16: return dot_bf16_avx2;
    case DType::Q4_0: return dot_q4_0_avx2;
    case DType::Q4_1: return dot_q4_1_avx2;
    case DType::Q5_0: return dot_q5_0_avx2;
    case DType::Q5_1: return dot_q5_1_avx2;
    case DType::Q8_0: return dot_q8_0_avx2;
    case DType::Q2_K: return dot_q2_k_avx2;
    case DType::Q3_K: return dot_q3_k_avx2;
    case DType::Q4_K: return dot_q4_k_avx2;
    case DType::Q5_K: return dot_q5_k_avx2;
    case DType::Q6_K: return dot_q6_k_avx2;
    case DType::Q8_K: return dot_q8_k_avx2;
    default: return nullptr;
  }
}

#else

DotFn dot_avx2_fn(DType) { return nullptr; }

#endif

}  // namespace minfer::quants
