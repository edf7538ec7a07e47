// Rotary position embedding (Su et al. 2021, RoFormer).
//
// For a head vector x of dim d and position p, pair k (k < n_rot/2) rotates by angle
// p * theta_k, theta_k = freq_scale * freq_base^(-2k/n_rot):
//   NORMAL (GPT-J / original, ggml mode 0): pairs (x[2k], x[2k+1]).
//   NEOX (GPT-NeoX rotate-half, ggml mode 2, Transformers' rotate_half): pairs (x[k], x[k + n_rot/2]).
// Dims at and past n_rot pass through unchanged.
#pragma once

#include <string_view>

#include "tensor/context.h"

namespace minfer::ops {

enum class RopeMode : int32_t { NORMAL = 0, NEOX = 2 };

struct RopeParams {
  int32_t n_rot = 0;  ///< rotated dims (even, <= head dim); 0 means the whole head dim
  RopeMode mode = RopeMode::NEOX;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
};

/// The RoPE mode an architecture uses (llama.cpp's llama_model_rope_type): "qwen2", "qwen3",
/// "qwen2moe", "phi3", "gemma", ... -> NEOX; "llama", "mistral" -> NORMAL. Throws
/// std::invalid_argument for an unknown architecture.
RopeMode rope_mode_for_arch(std::string_view arch);

/// x: f32 [head_dim, n_head, n_tokens] (strided views allowed); pos: I32 [n_tokens] positions.
/// -> f32 [head_dim, n_head, n_tokens] contiguous. Angles p * theta_k are formed in double, then
/// cos/sin rounded to f32, so long positions keep full f32 accuracy.
Tensor* rope(Context& ctx, Tensor* x, Tensor* pos, const RopeParams& p);

/// Reads RopeParams back from a ROPE (or QKV) node's op_params starting at word `first`.
RopeParams rope_params_of(const Tensor& node, int first = 0);
/// Writes RopeParams into op_params words [first, first + 4).
void set_rope_params(Tensor& node, const RopeParams& p, int first = 0);

}  // namespace minfer::ops
