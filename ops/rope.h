// Rotary position embedding (Su et al. 2021, RoFormer) with the context-extension scalings:
// linear interpolation (Chen et al. 2023), YaRN (Peng et al. 2023, arXiv:2309.00071) and Llama 3's
// per-frequency factors.
//
// For a head vector x of dim d and position p, pair k (k < n_rot/2) rotates by angle p * theta_k:
//   NORMAL (GPT-J / original, ggml mode 0): pairs (x[2k], x[2k+1]).
//   NEOX (GPT-NeoX rotate-half, ggml mode 2, Transformers' rotate_half): pairs (x[k], x[k + n_rot/2]).
// Dims at and past n_rot pass through unchanged. The rotated pair is scaled by attn_factor:
//   x'[a] = m * (x[a] cos(p theta_k) - x[b] sin(p theta_k)),  x'[b] = m * (x[a] sin + x[b] cos),
// with cos and sin multiplied by m = attn_factor before rounding to f32 (as Transformers multiplies
// cos/sin by `attention_scaling`).
//
// theta_k (rope_theta below; ggml's rope_yarn, Transformers' inv_freq):
//   theta_extrap = freq_base^(-2k/n_rot) / ff[k]       ff: optional freq_factors, 1 if absent
//   theta_interp = freq_scale * theta_extrap            freq_scale = 1/factor (linear, YaRN)
//   ext_factor == 0:  theta_k = theta_interp
//   ext_factor != 0 (YaRN): r_k = (1 - clamp((k - low) / max(0.001, high - low), 0, 1)) * ext_factor
//                     theta_k = theta_interp * (1 - r_k) + theta_extrap * r_k
// so pairs k <= low (many rotations within the original context) keep their frequency and pairs
// k >= high (less than beta_slow rotations) are interpolated by the factor. The correction range
// (rope_corr_dims; ggml_rope_yarn_corr_dims, Transformers' find_correction_range with
// truncate=True) is
//   corr_dim(r) = n_rot * ln(n_ctx_orig / (2 pi r)) / (2 ln freq_base)
//   low = max(0, floor(corr_dim(beta_fast))),  high = min(n_rot - 1, ceil(corr_dim(beta_slow))).
// Llama 3 (Transformers' _compute_llama3_parameters) divides theta_k by the GGUF tensor
// rope_freqs.weight: ff[k] = 1 for short wavelengths, `factor` for long ones, smoothed between.
//
// Differences from ggml_rope_ext, on purpose: ggml multiplies attn_factor by 1 + 0.1 ln(1/freq_scale)
// inside the kernel whenever ext_factor != 0 (llama.cpp divides that back out on the host); here
// attn_factor is the whole magnitude, and HParams::rope_params() computes YaRN's
// 0.1 ln(factor) + 1. Angles and theta are formed in double, then cos/sin rounded to f32 (ggml:
// f32 throughout), so positions in the tens of thousands keep full f32 accuracy.
#pragma once

#include <cmath>
#include <string>

#include "tensor/context.h"

#if defined(__CUDACC__)
#define MINFER_ROPE_HD __host__ __device__
#else
#define MINFER_ROPE_HD
#endif

namespace minfer::ops {

enum class RopeMode : int32_t { NORMAL = 0, NEOX = 2 };

struct RopeParams {
  int32_t n_rot = 0;  ///< rotated dims (even, <= head dim); 0 means the whole head dim
  RopeMode mode = RopeMode::NEOX;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   ///< 1/factor for linear and YaRN scaling
  float ext_factor = 0.0f;   ///< YaRN ramp weight: 0 off (plain / linear), 1 YaRN
  float attn_factor = 1.0f;  ///< magnitude m multiplying cos and sin (YaRN: 0.1 ln(factor) + 1)
  float beta_fast = 32.0f;   ///< YaRN: pairs with more rotations than this keep their frequency
  float beta_slow = 1.0f;    ///< YaRN: pairs with fewer rotations than this are fully interpolated
  int32_t n_ctx_orig = 0;    ///< YaRN: the original (pre-extension) context length
};

/// Number of 32-bit op-param words RopeParams takes (set_rope_params / rope_params_of).
inline constexpr int kRopeParamWords = 9;

/// x: f32 [head_dim, n_head, n_tokens] (strided views allowed); pos: I32 [n_tokens] positions;
/// freq_factors: optional f32 [n_rot/2] (contiguous), theta_k is divided by freq_factors[k]
/// (Llama 3's rope_freqs.weight; ggml_rope_ext's third source). -> f32 [head_dim, n_head,
/// n_tokens] contiguous. See the top of this file for the formula.
Tensor* rope(Context& ctx, Tensor* x, Tensor* pos, const RopeParams& p, Tensor* freq_factors = nullptr);

/// Reads RopeParams back from a ROPE (or QKV) node's op_params starting at word `first`.
RopeParams rope_params_of(const Tensor& node, int first = 0);
/// Writes RopeParams into op_params words [first, first + kRopeParamWords).
void set_rope_params(Tensor& node, const RopeParams& p, int first = 0);

/// Why `p` (n_rot resolved, not 0) cannot be used for heads of `head_dim`, or "" when it can. The
/// builders of ROPE and QKV throw OpError with it; HParams checks its values with it.
std::string rope_params_error(const RopeParams& p, int64_t head_dim);

/// YaRN's attention magnitude for a scaling factor (Transformers' get_mscale): 1 for factor <= 1,
/// else 0.1 ln(factor) + 1.
double yarn_mscale(double factor);

/// YaRN's correction range [low, high] in pair indices (both 0 when ext_factor == 0).
struct RopeCorrDims {
  double low = 0, high = 0;
};
RopeCorrDims rope_corr_dims(const RopeParams& p);

/// theta_k of pair k (see the top of this file), in double. Shared by the CPU and CUDA kernels so
/// both compute the same formula. freq_factor: ff[k], or 1.
MINFER_ROPE_HD inline double rope_theta(int k, int n_rot, double freq_base, double freq_scale, double ext_factor,
                                        RopeCorrDims corr, double freq_factor) {
  const double extrap = pow(freq_base, -2.0 * k / static_cast<double>(n_rot)) / freq_factor;
  const double interp = freq_scale * extrap;
  if (ext_factor == 0.0) return interp;
  const double y = (k - corr.low) / fmax(0.001, corr.high - corr.low);
  const double ramp = (1.0 - fmin(1.0, fmax(0.0, y))) * ext_factor;
  return interp * (1.0 - ramp) + extrap * ramp;
}

}  // namespace minfer::ops
