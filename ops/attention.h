// Causal grouped-query attention over a paged KV cache, driven by positions.
//
// The cache (runtime/kv_cache.h) stores one row per cell: k_cache [head_dim, n_head_kv, n_cells].
// Cells come in blocks of block_size; a sequence's token at position p lives in cell
// block_table[p / block_size, seq] * block_size + p % block_size. kv_store() writes new rows at
// their cells; attention() lets query t of sequence seq[t] see its own sequence's keys at
// positions 0..pos[t] and nothing else. Positions, sequence ids, cells and the table are all
// tensors (never op params), so one graph is valid at every depth and for every mix of
// sequences (a captured CUDA graph replays), and a rollback is just a shorter sequence.
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

enum class AttentionImpl : int32_t {
  AUTO = 0,     ///< the backend picks
  NAIVE = 1,    ///< full score row, softmax, weighted sum
  BLOCKED = 2,  ///< flash-style: KV blocks with an online softmax (Dao et al. 2022)
};

/// Writes x's rows into the cache at cells: cache[:, :, cells[t]] = x[:, :, t], converting to the
/// cache dtype (f32, f16 or q8_0). cache: [head_dim, n_head_kv, n_cells]; x: f32 [head_dim,
/// n_head_kv, n_tokens] (strided views allowed); cells: I32 [n_tokens]. Returns a node aliasing the
/// cache. A cell outside [0, n_cells) is a runtime error naming it.
Tensor* kv_store(Context& ctx, Tensor* cache, Tensor* x, Tensor* cells);

/// softmax(scale * q k^T + causal mask) v per head over the paged cache, with GQA: query head h
/// reads KV head h / (n_head / n_head_kv).
/// q: f32 [head_dim, n_head, n_tokens] (strided views allowed); k: [head_dim, n_head_kv, n_cells]
/// and v: [head_dim_v, n_head_kv, n_cells] of f32, f16 or q8_0 (the KV cache); pos, seq: I32
/// [n_tokens]; block_table: I32 [max_blocks, n_rows]. Query t sees the keys of block-table row
/// seq[t] at positions 0..pos[t]; position j is cell block_table[j / block_size, seq[t]] *
/// block_size + j % block_size. n_cells % block_size == 0; n_head % n_head_kv == 0. At run time
/// pos[t] < max_blocks * block_size, seq[t] < n_rows and every table entry read names a block of
/// the cache (else an error naming the value). Scores and softmax accumulate in f32 on every
/// backend; each query walks its keys in the same order whatever else is in the batch, so a row's
/// result does not depend on the batch (CPU always; CUDA inside its decode kernels).
/// -> f32 [head_dim_v, n_head, n_tokens] contiguous.
Tensor* attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* pos, Tensor* seq, Tensor* block_table,
                  int32_t block_size, float scale, AttentionImpl impl = AttentionImpl::AUTO);

}  // namespace minfer::ops
