// Mixture-of-experts ops: top-k routing and the expert matmul (ggml's ggml_top_k / ggml_mul_mat_id).
// A MoE FFN (Qwen3-MoE, docs/moe.md) is made of these and the basic ops:
//
//   probs = soft_max(mul_mat(w_router, x))                 // [n_expert, n_tokens]
//   ids   = top_k(probs, k)                                // I32 [k, n_tokens]
//   w     = get_rows(reshape(probs, {1, n_expert, n_tokens}), ids)   // [1, k, n_tokens]
//   h     = swiglu(mul_mat_id(gate_exps, ids, x3), mul_mat_id(up_exps, ids, x3))  // x3 = [n_embd, 1, n_tokens]
//   y     = mul(mul_mat_id(down_exps, ids, h), w)          // [n_embd, k, n_tokens], then summed over k
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

/// Indices of the k largest values of each row, largest first. x: f32 [n, rows...] (any strides)
/// -> I32 [k, rows...]; 1 <= k <= n, else OpError.
/// Ties: the lower index first (a total order, so every backend returns the same ids). This is
/// torch.topk's order under `stable=True` / deterministic mode; its default tie order is
/// unspecified (pytorch#88184: top-1 of [-1, -1, -1, -1] is index 2). NaN ranks above every
/// number (as torch.sort's descending order puts it), -inf below every finite value.
Tensor* top_k(Context& ctx, Tensor* x, int32_t k);

/// Expert matmul: for every token t and slot j, out[:, j, t] = mul_mat(as[:, :, ids[j, t]], b[:, j % n_act, t]).
/// as: [K, M, n_expert] expert weights of any dtype mul_mat takes (rows contiguous);
/// ids: I32 [k, n_tokens], each in [0, n_expert) (checked at run time: an id outside is an OpError
///      on the CPU and a reported error on devices); repeated experts and unused experts are fine;
/// b: f32/f16 [K, n_act, n_tokens] with n_act = 1 (one activation row per token, broadcast over
///    the k slots) or n_act = k (one row per slot).
/// -> f32 [M, k, n_tokens]. Each (token, slot) has exactly the numerics of mul_mat over that
/// expert's 2-D slice with that activation row (same activation quantization, same dot) up to the
/// backend's batch_invariant_rows() tokens. Past that a device may group the pairs by expert
/// (CUDA: tensor-core tiles of up to 64 pairs per expert), whose sums round differently from the
/// one-row matvec; a pair's value still depends only on its expert and activation row.
Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* ids, Tensor* b);

}  // namespace minfer::ops
