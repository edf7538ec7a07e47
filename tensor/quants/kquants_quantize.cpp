// Encoders of the K-quant formats. The sub-block fits are the searches llama-quantize uses when
// it has no importance matrix (quantize_row_q*_K_ref in ggml-quants.c):
//   Q2_K  per 16: scale + min, |x|-weighted mean absolute error, 16 trial scales.
//   Q3_K  per 16: symmetric, x^2-weighted least squares with 5 rounds of coordinate descent.
//   Q4_K  per 32: scale + min, (rms + |x|)-weighted least squares, 21 trial scales.
//   Q5_K  per 32: as Q4_K with 16 trial scales.
//   Q6_K  per 16: symmetric, x^2-weighted least squares over 19 trial scales.
// The sub-block scales (and mins) are then quantized against one f16 super-block scale, and
// every element is re-quantized to the nearest level of its final decoded scale.
// ggml's reference C code rounds every f32 operation separately; fusing a*b+c into an FMA would
// change which scales win, so contraction is off for this file whatever the build flags say.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <cmath>
#include <stdexcept>
#include <string>

#include "tensor/quants/internal.h"

namespace minfer::quants {

namespace {

constexpr float kGroupMaxEps = 1e-15f;

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

void check_scale(const char* type, uint16_t bits) {
  if ((bits & 0x7C00u) == 0x7C00u)
    throw std::invalid_argument(std::string("quantize_row(") + type +
                                "): block magnitude needs a scale beyond the f16 range");
}

// The value of largest magnitude (signed) of x[0..n); 0 when every |x| is below kGroupMaxEps,
// in which case L is zeroed (an all-zero group quantizes to scale 0).
float signed_absmax_or_zero(int n, const float* x, int8_t* L) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) {
      amax = a;
      vmax = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  return vmax;
}

// Symmetric fit x ~= s * (L - nmax), L in [0, 2*nmax - 1], weights x^2 (make_qx_quants with
// rmse_type 1). Returns s.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  const float vmax = signed_absmax_or_zero(n, x, L);
  if (vmax == 0.f) return 0.f;
  const auto clampl = [nmax](int l) { return l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l); };
  float iscale = -static_cast<float>(nmax) / vmax;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clampl(nearest_int(iscale * x[i]));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / vmax;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clampl(nearest_int(iscale * x[i]));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + clampl(nearest_int(iscale * x[i])));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric 3-bit fit (make_q3_quants with do_rmse): start from absmax rounding, then move one
// level at a time while the x^2-weighted least-squares objective improves. L in [0, 2*nmax-1].
float fit_symmetric_q3(int n, int nmax, const float* x, int8_t* L) {
  const float vmax = signed_absmax_or_zero(n, x, L);
  if (vmax == 0.f) return 0.f;
  const auto clampl = [nmax](int l) { return l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l); };
  const float iscale = -static_cast<float>(nmax) / vmax;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clampl(nearest_int(iscale * x[i]));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (slx > 0) {
        float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
        const int nl = clampl(nearest_int(x[i] * sl2 / slx));
        if (nl != L[i]) {
          slx += w * x[i] * static_cast<float>(nl);
          sl2 += w * static_cast<float>(nl) * static_cast<float>(nl);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(nl);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.f ? sumlx / suml2 : 0.f;
}

// Scale + min fit x ~= s * L - m with L in [0, nmax], m >= 0 (make_qkx2_quants): tries
// nstep + 1 inverse scales (nmax + rmin + rdelta * k) / (max - min) and keeps the weighted
// least-squares (scale, min) with the lowest weighted error (absolute error when use_mad).
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                    float rmin, float rdelta, int nstep, bool use_mad) {
  float vmin = x[0], vmax = x[0];
  float sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    vmin = x[i] < vmin ? x[i] : vmin;
    vmax = x[i] > vmax ? x[i] : vmax;
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (vmin > 0) vmin = 0;
  if (vmax == vmin) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -vmin;
    return 0.f;
  }
  const auto clampl = [nmax](int l) { return l < 0 ? 0 : (l > nmax ? nmax : l); };
  const auto loss = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  float iscale = static_cast<float>(nmax) / (vmax - vmin);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clampl(nearest_int(iscale * (x[i] - vmin))));
    best_error += w[i] * loss(scale * static_cast<float>(L[i]) + vmin - x[i]);
  }
  uint8_t Laux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (vmax - vmin);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clampl(nearest_int(iscale * (x[i] - vmin)));
      Laux[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i)
        cur_error += w[i] * loss(this_scale * static_cast<float>(Laux[i]) + this_min - x[i]);
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        vmin = this_min;
      }
    }
  }
  *the_min = -vmin;
  return scale;
}

// Q4_K/Q5_K: packs 6-bit scale ls and min lm of sub-block j into the 12-byte array (the
// inverse of get_scale_min_k4). `s` must start zeroed.
void pack_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t* s) {
  if (j < 4) {
    s[j] = ls;
    s[j + 4] = lm;
  } else {
    s[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    s[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
    s[j] |= static_cast<uint8_t>((lm >> 4) << 6);
  }
}

// Shared by Q4_K and Q5_K: fits the 8 sub-blocks, quantizes their scales/mins to 6 bits and
// returns the final levels L (0..nmax) of all 256 elements.
void encode_k4_scales(const char* type, const float* x, int nmax, float rmin, int nstep,
                      uint16_t* d, uint16_t* dmin, uint8_t* scales, uint8_t* L) {
  float mins[8], sub_scales[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    sub_scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    max_scale = sub_scales[j] > max_scale ? sub_scales[j] : max_scale;
    max_min = mins[j] > max_min ? mins[j] : max_min;
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int ls = nearest_int(inv_scale * sub_scales[j]);
    const int lm = nearest_int(inv_min * mins[j]);
    pack_scale_min_k4(j, static_cast<uint8_t>(clamp_int(ls, 0, 63)), static_cast<uint8_t>(clamp_int(lm, 0, 63)),
                      scales);
  }
  *d = to_f16(max_scale / 63.f);
  *dmin = to_f16(max_min / 63.f);
  check_scale(type, *d);
  check_scale(type, *dmin);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, scales, &sc, &m);
    const float dl = f16(*d) * static_cast<float>(sc);
    if (dl == 0.f) continue;
    const float ml = f16(*dmin) * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int q = nearest_int((x[32 * j + l] + ml) / dl);
      L[32 * j + l] = static_cast<uint8_t>(q < 0 ? 0 : (q > nmax ? nmax : q));
    }
  }
}

}  // namespace

void quantize_q2_k(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQKK;
  auto* y = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQKK) {
    uint8_t L[kQKK];
    float mins[16], sub_scales[16], w[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(src[16 * j + l]);
      sub_scales[j] = fit_scale_min(16, 3, src + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      max_scale = sub_scales[j] > max_scale ? sub_scales[j] : max_scale;
      max_min = mins[j] > max_min ? mins[j] : max_min;
    }
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * sub_scales[j]), 0, 15));
      y[i].d = to_f16(max_scale / 15.f);
    } else {
      for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
      y[i].d = to_f16(0.f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int j = 0; j < 16; ++j)
        y[i].scales[j] |= static_cast<uint8_t>(clamp_int(nearest_int(iscale * mins[j]), 0, 15) << 4);
      y[i].dmin = to_f16(max_min / 15.f);
    } else {
      y[i].dmin = to_f16(0.f);
    }
    check_scale("q2_K", y[i].d);
    check_scale("q2_K", y[i].dmin);
    for (int j = 0; j < 16; ++j) {
      const float dl = f16(y[i].d) * static_cast<float>(y[i].scales[j] & 0xF);
      if (dl == 0.f) continue;
      const float ml = f16(y[i].dmin) * static_cast<float>(y[i].scales[j] >> 4);
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int((src[16 * j + l] + ml) / dl);
        L[16 * j + l] = static_cast<uint8_t>(q < 0 ? 0 : (q > 3 ? 3 : q));
      }
    }
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const uint8_t* Lh = L + 128 * h + l;
        y[i].qs[32 * h + l] = static_cast<uint8_t>(Lh[0] | (Lh[32] << 2) | (Lh[64] << 4) | (Lh[96] << 6));
      }
  }
}

void quantize_q3_k(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQKK;
  auto* y = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQKK) {
    int8_t L[kQKK];
    float sub_scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      sub_scales[j] = fit_symmetric_q3(16, 4, src + 16 * j, L + 16 * j);
      const float a = std::fabs(sub_scales[j]);
      if (a > amax) {
        amax = a;
        max_scale = sub_scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale != 0.f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int l = nearest_int(iscale * sub_scales[j]);
        l = (l < -32 ? -32 : (l > 31 ? 31 : l)) + 32;
        if (j < 8)
          y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
        else
          y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        y[i].scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y[i].d = to_f16(1 / iscale);
    } else {
      y[i].d = to_f16(0.f);
    }
    check_scale("q3_K", y[i].d);
    int8_t sc[16];
    unpack_q3_k_scales(y[i].scales, sc);
    for (int j = 0; j < 16; ++j) {
      const float dl = f16(y[i].d) * static_cast<float>(sc[j] - 32);
      if (dl == 0.f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int(src[16 * j + l] / dl);
        L[16 * j + l] = static_cast<int8_t>((q < -4 ? -4 : (q > 3 ? 3 : q)) + 4);
      }
    }
    // Levels 4..7 set the high bit (hmask bit e / 32 of byte e % 32) and keep 2 low bits.
    std::memset(y[i].hmask, 0, sizeof y[i].hmask);
    for (int e = 0; e < kQKK; ++e) {
      if (L[e] > 3) {
        y[i].hmask[e % 32] |= static_cast<uint8_t>(1u << (e / 32));
        L[e] = static_cast<int8_t>(L[e] - 4);
      }
    }
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const int8_t* Lh = L + 128 * h + l;
        y[i].qs[32 * h + l] = static_cast<uint8_t>(Lh[0] | (Lh[32] << 2) | (Lh[64] << 4) | (Lh[96] << 6));
      }
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQKK;
  auto* y = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQKK) {
    uint8_t L[kQKK];
    encode_k4_scales("q4_K", src, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQKK;
  auto* y = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQKK) {
    uint8_t L[kQKK];
    encode_k4_scales("q5_K", src, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, sizeof y[i].qh);
    for (int e = 0; e < kQKK; ++e)
      if (L[e] > 15) y[i].qh[e % 32] |= static_cast<uint8_t>(1u << (e / 32));
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * c + l] = static_cast<uint8_t>((L[64 * c + l] & 0xF) | ((L[64 * c + 32 + l] & 0xF) << 4));
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQKK;
  auto* y = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, src += kQKK) {
    int8_t L[kQKK];
    float sub_scales[16];
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; ++j) {
      sub_scales[j] = fit_symmetric(16, 32, src + 16 * j, L + 16 * j);
      const float a = std::fabs(sub_scales[j]);
      if (a > max_abs) {
        max_abs = a;
        max_scale = sub_scales[j];
      }
    }
    if (max_abs < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = to_f16(1 / iscale);
    check_scale("q6_K", y[i].d);
    for (int j = 0; j < 16; ++j) {
      const int s = nearest_int(iscale * sub_scales[j]);
      y[i].scales[j] = static_cast<int8_t>(s < 127 ? s : 127);
    }
    for (int j = 0; j < 16; ++j) {
      const float dl = f16(y[i].d) * static_cast<float>(y[i].scales[j]);
      if (dl == 0.f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int(src[16 * j + l] / dl);
        L[16 * j + l] = static_cast<int8_t>((q < -32 ? -32 : (q > 31 ? 31 : q)) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = y[i].ql + 64 * h;
      uint8_t* qh = y[i].qh + 32 * h;
      const int8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                     ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

void quantize_q8_k(const float* src, void* dst, int64_t n) { quantize_act_q8_k_scalar(src, dst, n); }

}  // namespace minfer::quants
