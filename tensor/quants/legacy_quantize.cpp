// Encoders of the 32-element formats with a per-block scale search.
//
// Every candidate scale is rounded to f16 first and scored by the exact squared error of what
// the decoder will produce, so the winner is never worse than any candidate tried. The
// candidates include ggml's reference encodings (quantize_row_q4_0_ref & co: the signed
// absmax mapped to the most negative level, or min/max for the _1 formats) and plain absmax
// round-to-nearest, plus a sweep of nearby scales (as make_qx_quants / make_qkx2_quants do)
// each followed by a least-squares refit of the scale (and offset) for the chosen levels.
// No FMA contraction whatever the build flags: the chosen scales then depend only on the input,
// not on the compiler options (the searches compare sums that contraction would round
// differently).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "tensor/quants/internal.h"

namespace minfer::quants {

namespace {

constexpr int kBlock = 32;
constexpr float kF16Max = 65504.f;

[[noreturn]] void throw_scale_overflow(const char* type, float v) {
  throw std::invalid_argument(std::string("quantize_row(") + type + "): block magnitude " +
                              std::to_string(v) + " needs a scale beyond the f16 range");
}

// Symmetric formats: x ~= d * q, q in [qlo, qhi].
struct SymBest {
  float err = std::numeric_limits<float>::infinity();
  uint16_t d = 0;
  int8_t q[kBlock] = {};
};

// Scores scale `d` (rounded to f16); when `refit` also tries the least-squares scale for the
// levels it picked. Updates `best` when better.
void try_symmetric(const float* x, int qlo, int qhi, float d, bool refit, SymBest& best) {
  const uint16_t dbits = to_f16(d);
  const float dh = f16(dbits);
  if (!(std::fabs(dh) > 0.f) || !std::isfinite(dh)) return;
  const float id = 1.f / dh;
  int8_t q[kBlock];
  float err = 0, sumlx = 0, suml2 = 0;
  for (int j = 0; j < kBlock; ++j) {
    int l = nearest_int(x[j] * id);
    l = l < qlo ? qlo : (l > qhi ? qhi : l);
    q[j] = static_cast<int8_t>(l);
    const float fl = static_cast<float>(l);
    const float e = fl * dh - x[j];
    err += e * e;
    sumlx += x[j] * fl;
    suml2 += fl * fl;
  }
  if (err < best.err) {
    best.err = err;
    best.d = dbits;
    std::memcpy(best.q, q, sizeof q);
  }
  if (refit && suml2 > 0) try_symmetric(x, qlo, qhi, static_cast<float>(sumlx / suml2), false, best);
}

// Searches the scale of one block; returns the f16 scale and the levels in q (signed).
uint16_t search_symmetric(const char* type, const float* x, int qlo, int qhi, int8_t* q) {
  float amax = 0, vmax = 0;
  for (int j = 0; j < kBlock; ++j) {
    const float a = std::fabs(x[j]);
    if (a > amax) {
      amax = a;
      vmax = x[j];
    }
  }
  SymBest best;
  if (amax > 0) {
    if (amax / static_cast<float>(qhi) > kF16Max) throw_scale_overflow(type, amax);
    // Plain absmax round-to-nearest, and the extreme mapped onto the most negative level.
    try_symmetric(x, qlo, qhi, amax / static_cast<float>(qhi), true, best);
    try_symmetric(x, qlo, qhi, vmax / static_cast<float>(qlo), true, best);
    const float nmax = static_cast<float>(-qlo);
    for (int is = -9; is <= 9; ++is) {
      if (is == 0) continue;
      try_symmetric(x, qlo, qhi, -vmax / (nmax + 0.1f * static_cast<float>(is)), true, best);
    }
  }
  if (best.err == std::numeric_limits<float>::infinity()) {  // all zero, or below f16 range
    std::memset(q, 0, kBlock);
    return 0;
  }
  std::memcpy(q, best.q, kBlock);
  return best.d;
}

// Offset formats: x ~= d * q + m, q in [0, nmax].
struct AffBest {
  float err = std::numeric_limits<float>::infinity();
  uint16_t d = 0, m = 0;
  uint8_t q[kBlock] = {};
};

void try_affine(const float* x, int nmax, float d, float m, bool refit, AffBest& best) {
  const uint16_t dbits = to_f16(d), mbits = to_f16(m);
  const float dh = f16(dbits), mh = f16(mbits);
  if (!(dh > 0.f) || !std::isfinite(dh) || !std::isfinite(mh)) return;
  const float id = 1.f / dh;
  uint8_t q[kBlock];
  float err = 0, sl = 0, sl2 = 0, sx = 0, sxl = 0;
  for (int j = 0; j < kBlock; ++j) {
    int l = nearest_int((x[j] - mh) * id);
    l = l < 0 ? 0 : (l > nmax ? nmax : l);
    q[j] = static_cast<uint8_t>(l);
    const float fl = static_cast<float>(l);
    const float e = fl * dh + mh - x[j];
    err += e * e;
    sl += fl;
    sl2 += fl * fl;
    sx += x[j];
    sxl += x[j] * fl;
  }
  if (err < best.err) {
    best.err = err;
    best.d = dbits;
    best.m = mbits;
    std::memcpy(best.q, q, sizeof q);
  }
  const float det = kBlock * sl2 - sl * sl;
  if (refit && det > 0) {
    try_affine(x, nmax, static_cast<float>((kBlock * sxl - sx * sl) / det),
               static_cast<float>((sl2 * sx - sl * sxl) / det), false, best);
  }
}

void search_affine(const char* type, const float* x, int nmax, uint16_t* d, uint16_t* m,
                   uint8_t* q) {
  float vmin = x[0], vmax = x[0];
  for (int j = 1; j < kBlock; ++j) {
    vmin = x[j] < vmin ? x[j] : vmin;
    vmax = x[j] > vmax ? x[j] : vmax;
  }
  if (std::fabs(vmin) > kF16Max || std::fabs(vmax) > kF16Max)
    throw_scale_overflow(type, std::fmax(std::fabs(vmin), std::fabs(vmax)));
  AffBest best;
  const float range = vmax - vmin;
  if (range > 0) {
    const float fn = static_cast<float>(nmax);
    try_affine(x, nmax, range / fn, vmin, true, best);  // ggml's reference min/max encoding
    for (int is = 0; is <= 20; ++is) {                  // make_qkx2_quants-style sweep
      const float iscale = (-1.f + 0.1f * static_cast<float>(is) + fn) / range;
      float sl = 0, sl2 = 0, sx = 0, sxl = 0;
      for (int j = 0; j < kBlock; ++j) {
        int l = nearest_int(iscale * (x[j] - vmin));
        l = l < 0 ? 0 : (l > nmax ? nmax : l);
        const float fl = static_cast<float>(l);
        sl += fl;
        sl2 += fl * fl;
        sx += x[j];
        sxl += x[j] * fl;
      }
      const float det = kBlock * sl2 - sl * sl;
      if (det > 0)
        try_affine(x, nmax, static_cast<float>((kBlock * sxl - sx * sl) / det),
                   static_cast<float>((sl2 * sx - sl * sxl) / det), true, best);
    }
  }
  if (best.err == std::numeric_limits<float>::infinity()) {  // constant block
    *d = 0;
    *m = to_f16(vmin);
    std::memset(q, 0, kBlock);
    return;
  }
  *d = best.d;
  *m = best.m;
  std::memcpy(q, best.q, kBlock);
}

inline void pack_nibbles(const uint8_t* l, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((l[j] & 0xF) | ((l[j + 16] & 0xF) << 4));
}

inline void pack_high_bits(const uint8_t* l, uint8_t qh[4]) {
  uint32_t h = 0;
  for (int j = 0; j < kBlock; ++j) h |= static_cast<uint32_t>((l[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(h >> (8 * k));
}

}  // namespace

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kBlock) {
    int8_t q[kBlock];
    y[i].d = search_symmetric("q4_0", src, -8, 7, q);
    uint8_t u[kBlock];
    for (int j = 0; j < kBlock; ++j) u[j] = static_cast<uint8_t>(q[j] + 8);
    pack_nibbles(u, y[i].qs);
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kBlock) {
    int8_t q[kBlock];
    y[i].d = search_symmetric("q5_0", src, -16, 15, q);
    uint8_t u[kBlock];
    for (int j = 0; j < kBlock; ++j) u[j] = static_cast<uint8_t>(q[j] + 16);
    pack_nibbles(u, y[i].qs);
    pack_high_bits(u, y[i].qh);
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kBlock) y[i].d = search_symmetric("q8_0", src, -127, 127, y[i].qs);
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kBlock) {
    y[i].d = search_symmetric("q8_1", src, -127, 127, y[i].qs);
    int sum = 0;
    for (int j = 0; j < kBlock; ++j) sum += y[i].qs[j];
    y[i].s = to_f16(static_cast<float>(sum) * f16(y[i].d));
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kBlock) {
    uint8_t q[kBlock];
    search_affine("q4_1", src, 15, &y[i].d, &y[i].m, q);
    pack_nibbles(q, y[i].qs);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  auto* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kBlock) {
    uint8_t q[kBlock];
    search_affine("q5_1", src, 31, &y[i].d, &y[i].m, q);
    pack_nibbles(q, y[i].qs);
    pack_high_bits(q, y[i].qh);
  }
}

}  // namespace minfer::quants
