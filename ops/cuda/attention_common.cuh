// Internal to ops/cuda: what the attention kernel files share (k_attention.cu: KV_STORE, decode,
// SIMT prefill tiles; k_attention_fa.cu: the tensor-core prefill kernel): the paged-cache view and
// its lookups, and the tensor-core prefill's launcher.
#pragma once

#include "ops/cuda/device.cuh"
#include "ops/cuda/kernels.cuh"

namespace minfer::cuda {

// The paged cache as attention kernels see it.
struct Paged {
  const int32_t* pos;
  const int32_t* seq;
  const int32_t* table;  // [max_blocks, n_rows]
  int32_t max_blocks, n_rows, n_blocks, bs_log2;
};

// Query t's key count (0 for an invalid position or sequence, which is reported) and its
// block-table row.
__device__ __forceinline__ int64_t paged_query(const Paged& pk, int64_t t, const int32_t*& row, ErrorSink sink,
                                               bool report) {
  const int32_t p = pk.pos[t], s = pk.seq[t];
  const int64_t max_len = static_cast<int64_t>(pk.max_blocks) << pk.bs_log2;
  row = pk.table;
  if (p < 0 || p >= max_len) {
    if (report) report_error(sink, kErrAttentionPos, p, max_len);
    return 0;
  }
  if (s < 0 || s >= pk.n_rows) {
    if (report) report_error(sink, kErrAttentionSeq, s, pk.n_rows);
    return 0;
  }
  row = pk.table + static_cast<int64_t>(s) * pk.max_blocks;
  return static_cast<int64_t>(p) + 1;
}

// Query t's (last visible position, sequence) for the tiled prefill kernels, which walk a tile's
// queries in runs of one sequence: (-1, -1) for t >= T and for an invalid query (reported when
// `report`).
__device__ __forceinline__ void query_pos_seq(const Paged& pk, int64_t t, int64_t T, ErrorSink sink, bool report,
                                              int32_t& pos, int32_t& seq) {
  pos = seq = -1;
  if (t >= T) return;
  const int32_t* row;
  const int64_t len = paged_query(pk, t, row, sink, report);
  if (len <= 0) return;
  pos = static_cast<int32_t>(len - 1);
  seq = pk.seq[t];
}

// The cell of key j from its block-table entry b. An entry outside the cache is reported and
// clamped (the result is then garbage, and the error is raised at the next synchronize). Kernels
// that pipeline their copies load the entry (row[j >> bs_log2]) a step ahead and call this when
// they use it, so the table read is off the path between one step's copies and the next.
__device__ __forceinline__ int64_t entry_cell(const Paged& pk, int32_t b, int64_t j, ErrorSink sink) {
  if (static_cast<uint32_t>(b) >= static_cast<uint32_t>(pk.n_blocks)) {
    report_error(sink, kErrAttentionBlock, b, pk.n_blocks);
    b = 0;
  }
  return (static_cast<int64_t>(b) << pk.bs_log2) | (j & ((int64_t{1} << pk.bs_log2) - 1));
}

// Key j's block-table entry (entry_cell turns it into the cell, possibly a step later).
__device__ __forceinline__ int32_t table_entry(const Paged& pk, const int32_t* row, int64_t j) {
  return row[j >> pk.bs_log2];
}

// The cell of position j through a block-table row.
__device__ __forceinline__ int64_t paged_cell(const Paged& pk, const int32_t* row, int64_t j, ErrorSink sink) {
  return entry_cell(pk, table_entry(pk, row, j), j, sink);
}

// Four int8 (one 32-bit word, bytes 0..3) times the f16 scales d2, as two f16 pairs: (q0, q1) * d2
// into lo, (q2, q3) * d2 into hi, each exactly f16(q * d): 0x6400 | (q + 128) is the f16
// 1024 + q + 128, minus 1152 is exactly q, and the product is rounded once (as
// __float2half_rn(float(q) * d) rounds it: that f32 product is exact). The tensor-core decode and
// prefill kernels widen their q8_0 K/V with it.
__device__ __forceinline__ void q8_widen4(uint32_t w, __half2 d2, uint32_t& lo, uint32_t& hi) {
  const uint32_t u = w ^ 0x80808080u;
  const uint32_t a = __byte_perm(u, 0x64646464u, 0x5140), b = __byte_perm(u, 0x64646464u, 0x7362);
  const __half2 k1152 = __half2half2(__ushort_as_half(0x6480));  // 1152
  const __half2 x = __hmul2(__hsub2(*reinterpret_cast<const __half2*>(&a), k1152), d2);
  const __half2 y = __hmul2(__hsub2(*reinterpret_cast<const __half2*>(&b), k1152), d2);
  lo = *reinterpret_cast<const uint32_t*>(&x);
  hi = *reinterpret_cast<const uint32_t*>(&y);
}

/// Prefill attention on the tensor cores (k_attention_fa.cu): runs it and returns true when it
/// takes the node (f16 or q8_0 K and V, head_dim == head_dim_v in {64, 128}, rows aligned for
/// cp.async: 16 bytes for f16, 4 for q8_0); returns false, launching nothing, otherwise.
/// out: f32 [dv, n_head, T] contiguous. Any T works; launch_attention sends it T > kDecodeMaxRows.
bool launch_fa(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk, float scale,
               int group, float* out);

}  // namespace minfer::cuda
