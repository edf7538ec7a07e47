// Causal grouped-query attention over a KV cache, driven by positions.
//
// The KV cache holds one row per position: k_cache [head_dim, n_head_kv, n_ctx]. kv_store()
// writes new rows at their positions; attention() lets query i see keys 0..pos[i]. Because both
// read positions from a tensor (not from op params), the decode graph is identical step after
// step (a captured CUDA graph stays valid) and a rollback is just a smaller next position.
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

enum class AttentionImpl : int32_t {
  AUTO = 0,     ///< the backend picks
  NAIVE = 1,    ///< full score row, softmax, weighted sum
  BLOCKED = 2,  ///< flash-style: KV blocks with an online softmax (Dao et al. 2022)
};

/// Writes x's rows into the cache at positions: cache[:, :, pos[t]] = x[:, :, t], converting to
/// the cache dtype (f32, f16 or q8_0). cache: [head_dim, n_head_kv, n_ctx]; x: f32 [head_dim,
/// n_head_kv, n_tokens] (strided views allowed); pos: I32 [n_tokens]. Returns a node aliasing the
/// cache. A position outside [0, n_ctx) is a runtime error naming it.
Tensor* kv_store(Context& ctx, Tensor* cache, Tensor* x, Tensor* pos);

/// softmax(scale * q k^T + causal mask) v per head, with GQA: query head h reads KV head
/// h / (n_head / n_head_kv).
/// q: f32 [head_dim, n_head, n_tokens] (strided views allowed); k: [head_dim, n_head_kv, n_kv]
/// and v: [head_dim_v, n_head_kv, n_kv] of f32, f16 or q8_0 (typically the KV cache);
/// pos: I32 [n_tokens]; query t sees keys 0..pos[t] (pos[t] < n_kv). n_head % n_head_kv == 0.
/// Scores and softmax accumulate in f32 on every backend.
/// -> f32 [head_dim_v, n_head, n_tokens] contiguous.
Tensor* attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* pos, float scale,
                  AttentionImpl impl = AttentionImpl::AUTO);

}  // namespace minfer::ops
