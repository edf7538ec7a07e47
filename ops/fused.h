// Fused ops. Each has a decomposition into basic ops (ops/lower.h): a backend without a fused
// kernel runs the decomposition, and tests compare the two.
#pragma once

#include "ops/rope.h"
#include "tensor/context.h"

namespace minfer::ops {

/// SwiGLU feed-forward: w_down · (silu(w_gate · x) * (w_up · x)).
/// x: f32 [n_embd, n_tokens]; w_gate, w_up: [n_embd, n_ff] (any weight dtype); w_down: [n_ff, n_embd].
/// When w_gate and w_up are adjacent row ranges of one tensor (see adjacent_rows()), the gate and
/// up projections run as one matmul. -> f32 [n_embd, n_tokens].
Tensor* ffn_swiglu(Context& ctx, Tensor* x, Tensor* w_gate, Tensor* w_up, Tensor* w_down);

struct QkvParams {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  RopeParams rope;
  float norm_eps = 1e-6f;  ///< for q_norm / k_norm
};

struct QkvWeights {
  Tensor* wq = nullptr;  ///< [n_embd, n_head * head_dim]
  Tensor* wk = nullptr;  ///< [n_embd, n_head_kv * head_dim]
  Tensor* wv = nullptr;  ///< [n_embd, n_head_kv * head_dim]
  Tensor* bq = nullptr;  ///< optional biases (Qwen2), f32 [rows]
  Tensor* bk = nullptr;
  Tensor* bv = nullptr;
  Tensor* q_norm = nullptr;  ///< optional per-head RMSNorm weights (Qwen3), f32 [head_dim]
  Tensor* k_norm = nullptr;
  Tensor* rope_freqs = nullptr;  ///< optional RoPE frequency factors (Llama 3), f32 [n_rot/2]; see ops::rope
};

/// The attention input block: q,k,v projections (one matmul when wq|wk|wv are adjacent rows of one
/// tensor), optional bias, optional per-head q/k RMSNorm, RoPE on q and k (p.rope with the optional
/// w.rope_freqs, exactly as ops::rope), and the KV-cache store of k and v at `cells`
/// (ops::kv_store). x: f32 [n_embd, n_tokens]; pos, cells: I32 [n_tokens]; k_cache, v_cache:
/// [head_dim, n_head_kv, n_cells]. Returns the rotated queries, f32 [head_dim, n_head, n_tokens];
/// its consumers are ordered after the cache stores.
Tensor* qkv(Context& ctx, Tensor* x, const QkvWeights& w, Tensor* pos, Tensor* cells, Tensor* k_cache,
            Tensor* v_cache, const QkvParams& p);

/// If `a` and `b` are views of consecutive row ranges of the same contiguous storage (b's first
/// row directly follows a's last) with the same dtype and row length, returns a view spanning
/// both; otherwise nullptr. Models load concatenated weights this way (e.g. wq|wk|wv).
Tensor* adjacent_rows(Context& ctx, Tensor* a, Tensor* b);

}  // namespace minfer::ops
