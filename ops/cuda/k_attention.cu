// KV_STORE and ATTENTION on the GPU over the paged KV cache (semantics of ops/cpu/k_attention.cpp).
//
// Attention reads every query's position and sequence from device tensors: query t sees the keys
// of block-table row seq[t] at positions 0..pos[t], position j living in cell
// table[seq[t]][j / block_size] * block_size + j % block_size. The launch shape depends only on
// tensor shapes, never on positions, sequences or the table, so a captured CUDA graph replays
// correctly at any depth and for any mix of sequences.
// - T <= 64 queries (kDecodeMaxRows): split-KV ("flash-decoding"): split s of a query takes an
//   equal share of its visible keys (computed on the device from pos[t]), keeps an online softmax,
//   and writes (max, sum, acc[dv]); the combine (attn_combine_kernel for one query,
//   attn_combine_rows_kernel for a batch: the same bits) merges the splits of every head in
//   parallel. Three kernels: attn_mma_decode_kernel (f16/q8_0 caches, head dims 64/128, GQA group
//   <= 16: tensor cores, a block per 1-4 KV heads serving all their query heads, blocks walking
//   the active (query, split) items), attn_gqa_kernel (the SIMT form for f32 caches and head dim
//   256, group <= 8; grid (splits, KV heads, queries)), attn_split_kernel (anything else, a block
//   per query head and split).
// - Every split-KV path launches a split count fixed by the longest sequence the table allows and
//   the head counts, and each query uses ceil(kv_len / chunk) of them with chunk = a multiple of
//   64 keys set by its own kv_len: never by T or the other queries, so query t of a T-query batch
//   gets the same bits as a one-query step at pos[t] (batch invariance: speculative
//   verification and continuous batching reproduce plain decoding exactly).
// - T > 64 (prefill) over f16 or q8_0 caches with head dims 64/128: attn_fa_kernel, FlashAttention-2
//   on the tensor cores (mma.sync f16 in, f32 accumulate; k_attention_fa.cu). Otherwise flash-style SIMT tiles
//   (Dao et al. 2022): a block holds 16 queries of one head, streams 32-key K/V tiles through shared
//   memory (widened to f32), one key per lane for the scores, online softmax per query. Both skip
//   keys past the largest position of a tile's queries, and walk a tile whose queries belong to
//   several sequences one run of one sequence's queries at a time.
// Scores, softmax and accumulation are f32 throughout (the tensor-core kernels round q and P to
// f16).
#include <algorithm>
#include <string>

#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/cp_async.cuh"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/quant_device.cuh"

namespace minfer::cuda {
namespace {

template <DType T>
__device__ __forceinline__ float kv_elem(const char* row, int e) {
  if constexpr (T == DType::F32) return reinterpret_cast<const float*>(row)[e];
  else if constexpr (T == DType::F16) return __half2float(reinterpret_cast<const __half*>(row)[e]);
  else return block_elem<DType::Q8_0>(row + (e >> 5) * 34, e & 31);
}

// The keys [j0, j1) split s of n_splits takes of kv_len keys: chunks of a multiple of 64 keys,
// sized by kv_len alone (batch invariance), so short sequences use few splits.
__device__ __forceinline__ int64_t split_chunk(int64_t kv_len, int n_splits) {
  return (((kv_len + n_splits - 1) / n_splits) + 63) / 64 * 64;
}
__device__ __forceinline__ void split_range(int64_t kv_len, int s, int n_splits, int64_t& j0, int64_t& j1) {
  const int64_t chunk = split_chunk(kv_len, n_splits);
  j0 = min(kv_len, s * chunk);
  j1 = min(kv_len, j0 + chunk);
}
// The splits that hold keys of a kv_len-key query (split 0 always counts: an invalid query,
// kv_len 0, writes its empty partial there). The others write nothing and are not combined, which
// changes no bits: their weight in the combine would be exactly 0.
__device__ __forceinline__ int active_splits(int64_t kv_len, int n_splits) {
  if (kv_len <= 0) return 1;
  const int64_t chunk = split_chunk(kv_len, n_splits);
  return static_cast<int>((kv_len + chunk - 1) / chunk);
}

// ---------------------------------------------------------------- KV_STORE

template <DType C>
__global__ void kv_store_kernel(TD x, TD cache, const int32_t* cells, ErrorSink sink) {
  const int64_t r = blockIdx.x;  // (head, token) of x
  const int64_t h = r % x.ne[1], t = r / x.ne[1];
  const int32_t p = cells[t];
  if (p < 0 || p >= cache.ne[2]) {
    if (threadIdx.x == 0) report_error(sink, kErrKvStorePos, p, cache.ne[2]);
    return;
  }
  const char* in = x.data + h * x.nb[1] + t * x.nb[2];
  char* out = cache.data + h * cache.nb[1] + static_cast<int64_t>(p) * cache.nb[2];
  const int64_t d = x.ne[0];
  if constexpr (C == DType::Q8_0) {
    const int lane = threadIdx.x & 31;
    for (int64_t b = threadIdx.x >> 5; b < d / 32; b += blockDim.x >> 5) {
      const float v = *reinterpret_cast<const float*>(in + (b * 32 + lane) * x.nb[0]);
      warp_quantize_q8_0(v, reinterpret_cast<BlockQ8_0*>(out) + b, lane);
    }
  } else {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float v = *reinterpret_cast<const float*>(in + i * x.nb[0]);
      if constexpr (C == DType::F32) reinterpret_cast<float*>(out)[i] = v;
      else reinterpret_cast<__half*>(out)[i] = __float2half_rn(v);
    }
  }
}

// ---------------------------------------------------------------- split-KV decode

// The split-KV combine: the splits of one (query head, query) merged into softmax(q K^T) V.
// Both kernels below keep kCombineWarps running partials (M, L, acc); running partial w takes
// splits w, w + kCombineWarps, ... one by one in that order (online softmax), and the partials
// are then merged in order of w. The order of every sum depends on the split count only, never
// on T or on which kernel runs, so both give the same bits (batch invariance). Only the query's
// active splits are read (the others hold stale partials).
constexpr int kCombineWarps = 8;

// A running accumulator and a split's, weighted: a * f_old + x * f with the roundings spelled out,
// so that no kernel's compiler contracts it differently (the two combines give the same bits).
__device__ __forceinline__ float fold(float a, float f_old, float x, float f) {
  return __fmaf_rn(x, f, __fmul_rn(a, f_old));
}

// One split's (m, l) into a running (M, L): the factors f_old and f of the running and the new
// accumulator (fold), or false for an empty split (weight exactly 0).
__device__ __forceinline__ bool merge_split(float& M, float& L, float2 ml, float& f_old, float& f) {
  if (ml.y <= 0.0f) return false;
  const float mn = fmaxf(M, ml.x);
  f_old = __expf(M - mn);  // exp(-inf) = 0 before the first split
  f = __expf(ml.x - mn);
  L = fold(L, f_old, ml.y, f);
  M = mn;
  return true;
}

// The kCombineWarps running partials merged into one output value; acc(w) is partial w's.
template <class Acc>
__device__ __forceinline__ float merge_partials(const float2* wml, Acc acc) {
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < kCombineWarps; ++w)
    if (wml[w].y > 0.0f) mx = fmaxf(mx, wml[w].x);
  float sum = 0.0f, x = 0.0f;
#pragma unroll
  for (int w = 0; w < kCombineWarps; ++w) {
    const float f = wml[w].y > 0.0f ? __expf(wml[w].x - mx) : 0.0f;
    sum = __fmaf_rn(wml[w].y, f, sum);
    x = __fmaf_rn(acc(w), f, x);
  }
  return x / sum;  // sum is 0 only for an invalid position (reported): NaN output
}

// One query (T = 1): a block per (query head, 32 output dims), running partial w in warp w, which
// issues the loads of up to kCombineBatch of its splits at once (every split of a long sequence in
// one round: the merge is latency-bound, a few MB over ~100 blocks).
constexpr int kCombineBatch = 32;

__global__ void __launch_bounds__(32 * kCombineWarps) attn_combine_kernel(const float* part_acc, const float2* part_ml,
                                                                          Paged pk, int n_splits, int dv, float* dst) {
  __shared__ float wacc[kCombineWarps][32];
  __shared__ float2 wml[kCombineWarps];
  const int h = blockIdx.x, t = blockIdx.y, n_head = gridDim.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int e = blockIdx.z * 32 + lane;
  const int64_t base = (static_cast<int64_t>(t) * n_head + h) * n_splits;
  const int32_t* row;
  const int n_active = active_splits(paged_query(pk, t, row, ErrorSink{}, false), n_splits);
  float M = -INFINITY, L = 0.0f, a = 0.0f;
  for (int i0 = warp; i0 < n_active; i0 += kCombineWarps * kCombineBatch) {
    float2 ml[kCombineBatch];
    float x[kCombineBatch];
#pragma unroll
    for (int b = 0; b < kCombineBatch; ++b) {
      const int i = i0 + b * kCombineWarps;
      ml[b] = i < n_active ? part_ml[base + i] : make_float2(0.0f, 0.0f);
      x[b] = i < n_active && e < dv ? part_acc[(base + i) * dv + e] : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < kCombineBatch; ++b) {
      float f_old, f;
      if (merge_split(M, L, ml[b], f_old, f)) a = fold(a, f_old, x[b], f);
    }
  }
  wacc[warp][lane] = a;
  if (lane == 0) wml[warp] = make_float2(M, L);
  __syncthreads();
  if (warp != 0 || e >= dv) return;
  dst[(static_cast<int64_t>(t) * n_head + h) * dv + e] = merge_partials(wml, [&](int w) { return wacc[w][lane]; });
}

// A batch of queries (T > 1): a warp per (query, query head) with every output dim (Dims a lane:
// lane + 32 d), the kCombineWarps running partials as register sets, a round's kCombineWarps
// splits loaded at once. attn_combine_kernel's 8 warps a (head, 32 dims) cost ~23 us at T = 16 and
// depth 512 (1,792 blocks for 8 active splits each, two blocks an SM by registers); this kernel
// runs the same sums from 112 blocks.
constexpr int kCombineRowsWarps = 4;

template <int Dims>
__global__ void __launch_bounds__(32 * kCombineRowsWarps)
    attn_combine_rows_kernel(const float* part_acc, const float2* part_ml, Paged pk, int n_splits, int n_head, int T,
                             int dv, float* dst) {
  const int wid = blockIdx.x * kCombineRowsWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (wid >= n_head * T) return;
  const int h = wid % n_head, t = wid / n_head;
  const int64_t base = (static_cast<int64_t>(t) * n_head + h) * n_splits;
  const int32_t* row;
  const int n_active = active_splits(paged_query(pk, t, row, ErrorSink{}, false), n_splits);
  float2 run[kCombineWarps];  // (M, L) of running partial w
  float a[kCombineWarps][Dims];
#pragma unroll
  for (int w = 0; w < kCombineWarps; ++w) {
    run[w] = make_float2(-INFINITY, 0.0f);
#pragma unroll
    for (int d = 0; d < Dims; ++d) a[w][d] = 0.0f;
  }
  for (int i0 = 0; i0 < n_active; i0 += kCombineWarps) {
    float2 ml[kCombineWarps];
    float x[kCombineWarps][Dims];
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w) {
      const int i = i0 + w;
      ml[w] = i < n_active ? part_ml[base + i] : make_float2(0.0f, 0.0f);
#pragma unroll
      for (int d = 0; d < Dims; ++d) {
        const int e = lane + 32 * d;
        x[w][d] = i < n_active && e < dv ? part_acc[(base + i) * dv + e] : 0.0f;
      }
    }
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w) {
      float f_old, f;
      if (merge_split(run[w].x, run[w].y, ml[w], f_old, f))
#pragma unroll
        for (int d = 0; d < Dims; ++d) a[w][d] = fold(a[w][d], f_old, x[w][d], f);
    }
  }
#pragma unroll
  for (int d = 0; d < Dims; ++d) {
    const int e = lane + 32 * d;
    if (e < dv) dst[(static_cast<int64_t>(t) * n_head + h) * dv + e] = merge_partials(run, [&](int w) { return a[w][d]; });
  }
}

constexpr int kSplitWarps = 4;
constexpr int kMaxDvPerLane = 8;  // dv <= 256

template <DType KT, DType VT>
__global__ void __launch_bounds__(32 * kSplitWarps) attn_split_kernel(TD q, TD k, TD v, Paged pk, float scale,
                                                                     int group, float* part_acc, float2* part_ml,
                                                                     ErrorSink sink) {
  extern __shared__ float smem[];  // q [d] | per-warp acc [warps][dv] | per-warp m,l [warps][2]
  const int s = blockIdx.x, n_splits = gridDim.x;
  const int h = blockIdx.y, t = blockIdx.z, n_head = gridDim.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int d = static_cast<int>(q.ne[0]), dv = static_cast<int>(v.ne[0]);
  float* qs = smem;
  float* wacc = smem + d;
  float* wml = wacc + kSplitWarps * dv;

  const int32_t* row;
  const int64_t kv_len = paged_query(pk, t, row, sink, threadIdx.x == 0 && s == 0 && h == 0);
  int64_t j0, j1;
  split_range(kv_len, s, n_splits, j0, j1);
  if (s > 0 && j0 >= j1) return;  // no keys here (active_splits)

  const char* qrow = q.data + static_cast<int64_t>(h) * q.nb[1] + static_cast<int64_t>(t) * q.nb[2];
  for (int e = threadIdx.x; e < d; e += blockDim.x) qs[e] = *reinterpret_cast<const float*>(qrow + e * q.nb[0]) * scale;
  __syncthreads();

  const int hk = h / group;
  const char* kbase = k.data + static_cast<int64_t>(hk) * k.nb[1];
  const char* vbase = v.data + static_cast<int64_t>(hk) * v.nb[1];
  float m = -INFINITY, l = 0.0f;
  float acc[kMaxDvPerLane];
#pragma unroll
  for (int i = 0; i < kMaxDvPerLane; ++i) acc[i] = 0.0f;
  for (int64_t j = j0 + warp; j < j1; j += kSplitWarps) {
    const int64_t cell = paged_cell(pk, row, j, sink);
    const char* kr = kbase + cell * k.nb[2];
    float part = 0.0f;
    for (int e = lane; e < d; e += 32) part += qs[e] * kv_elem<KT>(kr, e);
    const float sc = warp_sum(part);
    const float m_new = fmaxf(m, sc);
    const float corr = __expf(m - m_new);
    const float pj = __expf(sc - m_new);
    l = l * corr + pj;
    const char* vr = vbase + cell * v.nb[2];
#pragma unroll
    for (int i = 0; i < kMaxDvPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < dv) acc[i] = acc[i] * corr + pj * kv_elem<VT>(vr, e);
    }
    m = m_new;
  }
  // Merge the warps of this block.
#pragma unroll
  for (int i = 0; i < kMaxDvPerLane; ++i) {
    const int e = lane + 32 * i;
    if (e < dv) wacc[warp * dv + e] = acc[i];
  }
  if (lane == 0) {
    wml[2 * warp] = m;
    wml[2 * warp + 1] = l;
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kSplitWarps; ++w) M = fmaxf(M, wml[2 * w]);
  float L = 0.0f;
  float f[kSplitWarps];
  for (int w = 0; w < kSplitWarps; ++w) {
    f[w] = wml[2 * w + 1] > 0.0f ? __expf(wml[2 * w] - M) : 0.0f;
    L += wml[2 * w + 1] * f[w];
  }
  const int64_t base = (static_cast<int64_t>(t) * n_head + h) * n_splits;
  const int64_t pi = base + s;
  for (int e = threadIdx.x; e < dv; e += blockDim.x) {
    float a = 0.0f;
    for (int w = 0; w < kSplitWarps; ++w) a += wacc[w * dv + e] * f[w];
    part_acc[pi * dv + e] = a;
  }
  if (threadIdx.x == 0) part_ml[pi] = make_float2(M, L);
}

// ---------------------------------------------------------------- GQA-batched split-KV decode
//
// The decode step reads every cached key and value once per token, so the kernel's job is to
// stream K/V at bandwidth with many bytes in flight. One block serves one KV head and all `group`
// query heads that share it (each K/V row is loaded once, not `group` times). Its warps take
// 32-key chunks of the block's split in turn. For the scores lane l owns key l of the chunk and
// dots the whole K row (16-byte loads, all issued before use) with every query head of the group
// (kept pre-scaled in shared memory, read as broadcasts), so the online softmax needs one warp
// max and one warp sum per head per chunk instead of a reduction per key; for P·V lane l owns
// head-dim elements [l*E, l*E + E) and walks the chunk's V rows (f16 rows staged in shared memory
// by cp.async while the scores are computed, see gqa_stages_v). attn_combine_kernel
// then merges the splits of every query head in parallel. Head dims 64/128/256, group <= kGqaMax.

constexpr int kGqaWarps = 4;
constexpr int kGqaMax = 8;
constexpr int kChunkKeys = 32;  // one key per lane

// f16 V rows of head dim <= 128 are staged through shared memory with cp.async (16-byte rows:
// the cache's f16 layout), so the P·V walk reads them there instead of waiting on one global
// load per key; other V types load rows directly (q8_0 rows are 34-byte blocks, not 16-aligned).
template <int D, DType VT>
constexpr bool gqa_stages_v() {
  return VT == DType::F16 && D <= 128;
}

template <int E, DType T>
__device__ __forceinline__ void load_row(const char* row, int lane, float (&x)[E]) {
  if constexpr (T == DType::F16 && E % 4 == 0) {
#pragma unroll
    for (int c = 0; c < E / 4; ++c) {
      const uint2 u = *reinterpret_cast<const uint2*>(row + (lane * E + 4 * c) * 2);
      const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
      x[4 * c] = a.x;
      x[4 * c + 1] = a.y;
      x[4 * c + 2] = b.x;
      x[4 * c + 3] = b.y;
    }
  } else if constexpr (T == DType::F16 && E == 2) {
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(row + lane * 4));
    x[0] = a.x;
    x[1] = a.y;
  } else if constexpr (T == DType::F32 && E % 4 == 0) {
#pragma unroll
    for (int c = 0; c < E / 4; ++c) {
      const float4 f = *reinterpret_cast<const float4*>(row + (lane * E + 4 * c) * 4);
      x[4 * c] = f.x;
      x[4 * c + 1] = f.y;
      x[4 * c + 2] = f.z;
      x[4 * c + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) x[i] = kv_elem<T>(row, lane * E + i);
  }
}

// Elements [8c, 8c + 8) of a K row as f32.
template <DType T>
__device__ __forceinline__ void load8(const char* row, int c, float (&x)[8]) {
  if constexpr (T == DType::F16) {
    const uint4 u = *reinterpret_cast<const uint4*>(row + c * 16);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      x[2 * i] = f.x;
      x[2 * i + 1] = f.y;
    }
  } else if constexpr (T == DType::F32) {
    const float4 a = *reinterpret_cast<const float4*>(row + c * 32), b = *reinterpret_cast<const float4*>(row + c * 32 + 16);
    x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
    x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
  } else {  // q8_0: 8 quants of one block (34 bytes: f16 scale, 32 int8), 2-byte aligned
    const char* blk = row + (c >> 2) * 34;
    const float d = __half2float(*reinterpret_cast<const __half*>(blk));
    const int8_t* qv = reinterpret_cast<const int8_t*>(blk + 2 + (c & 3) * 8);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(qv[i]) * d;
  }
}

template <int D, DType KT, DType VT>
__global__ void __launch_bounds__(32 * kGqaWarps) attn_gqa_kernel(TD q, TD k, TD v, Paged pk, float scale,
                                                                  int group, float* part_acc, float2* part_ml,
                                                                  ErrorSink sink) {
  constexpr int E = D / 32;
  constexpr bool kStageV = gqa_stages_v<D, VT>();
  __shared__ float4 qs4[kGqaMax * D / 4];  // the group's queries, pre-scaled
  // kStageV: per-warp V rows of the chunk [warps][32][D] (f16) while streaming; then (all
  // configurations) per-warp acc [warps][group][D] | per-warp m,l [warps][group][2] for the merge.
  extern __shared__ __align__(16) float smem[];
  __half* vstage = reinterpret_cast<__half*>(smem) + static_cast<int64_t>(threadIdx.x >> 5) * kChunkKeys * D;
  const int s = blockIdx.x, n_splits = gridDim.x;
  const int hk = blockIdx.y, n_head_kv = gridDim.y, t = blockIdx.z;
  const int n_head = n_head_kv * group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* wacc = smem;
  float* wml = smem + kGqaWarps * group * D;

  const int32_t* row;
  const int64_t kv_len = paged_query(pk, t, row, sink, threadIdx.x == 0 && s == 0 && hk == 0);
  int64_t j0, j1;
  split_range(kv_len, s, n_splits, j0, j1);
  if (s > 0 && j0 >= j1) return;  // no keys here (active_splits)

  float* qs = reinterpret_cast<float*>(qs4);
  for (int i = threadIdx.x; i < group * D; i += blockDim.x) {
    const int g = i / D, e = i % D;
    qs[i] = *reinterpret_cast<const float*>(q.data + static_cast<int64_t>(hk * group + g) * q.nb[1] +
                                            static_cast<int64_t>(t) * q.nb[2] + e * q.nb[0]) * scale;
  }
  __syncthreads();

  float m[kGqaMax], l[kGqaMax], acc[kGqaMax][E];
#pragma unroll
  for (int g = 0; g < kGqaMax; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) acc[g][i] = 0.0f;
  }
  const char* kbase = k.data + static_cast<int64_t>(hk) * k.nb[1];
  const char* vbase = v.data + static_cast<int64_t>(hk) * v.nb[1];
  for (int64_t jc = j0 + static_cast<int64_t>(warp) * kChunkKeys; jc < j1; jc += kGqaWarps * kChunkKeys) {
    const int64_t j = jc + lane;
    const bool valid = j < j1;
    const int64_t cell = valid ? paged_cell(pk, row, j, sink) : 0;
    if constexpr (kStageV) {
      // The chunk's V rows go to shared memory now (no registers), in flight under the scores.
      __syncwarp();  // the previous chunk's rows have been read
      if (valid) {
        const char* vr = vbase + cell * v.nb[2];
#pragma unroll
        for (int c = 0; c < D / 8; ++c) cp_async16(vstage + lane * D + 8 * c, vr + 16 * c);
      }
      cp_async_commit();
    }
    // Scores of this lane's key against every head of the group.
    const char* kr = kbase + cell * k.nb[2];
    float sc[kGqaMax];
#pragma unroll
    for (int g = 0; g < kGqaMax; ++g) sc[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      float kx[8];
      load8<KT>(kr, c, kx);
#pragma unroll
      for (int g = 0; g < kGqaMax; ++g) {
        if (g >= group) break;
        const float4 a = qs4[(g * D + 8 * c) / 4], b = qs4[(g * D + 8 * c) / 4 + 1];
        sc[g] += a.x * kx[0] + a.y * kx[1] + a.z * kx[2] + a.w * kx[3] + b.x * kx[4] + b.y * kx[5] + b.z * kx[6] +
                 b.w * kx[7];
      }
    }
    // Online softmax over the chunk, head by head.
    float p[kGqaMax];
#pragma unroll
    for (int g = 0; g < kGqaMax; ++g) {
      if (g >= group) break;
      const float x = valid ? sc[g] : -INFINITY;
      const float m_new = fmaxf(m[g], warp_max(x));  // finite: key jc is always valid
      const float corr = __expf(m[g] - m_new);
      p[g] = valid ? __expf(x - m_new) : 0.0f;
      l[g] = l[g] * corr + warp_sum(p[g]);
#pragma unroll
      for (int i = 0; i < E; ++i) acc[g][i] *= corr;
      m[g] = m_new;
    }
    // P·V: the chunk's V rows, each lane its E elements.
    const int n_valid = static_cast<int>(min(static_cast<int64_t>(kChunkKeys), j1 - jc));
    if constexpr (kStageV) {
      cp_async_wait<0>();
      __syncwarp();
    }
#pragma unroll 4
    for (int jj = 0; jj < n_valid; ++jj) {
      float vx[E];
      if constexpr (kStageV) {
        load_row<E, DType::F16>(reinterpret_cast<const char*>(vstage + jj * D), lane, vx);
      } else {
        const int64_t cj = __shfl_sync(0xffffffffu, cell, jj);
        load_row<E, VT>(vbase + cj * v.nb[2], lane, vx);
      }
#pragma unroll
      for (int g = 0; g < kGqaMax; ++g) {
        if (g >= group) break;
        const float pj = __shfl_sync(0xffffffffu, p[g], jj);
#pragma unroll
        for (int i = 0; i < E; ++i) acc[g][i] += pj * vx[i];
      }
    }
  }

  // Merge the warps of this block, head by head.
  if constexpr (kStageV) __syncthreads();  // the merge arrays overlay the V stages
#pragma unroll
  for (int g = 0; g < kGqaMax; ++g) {
    if (g >= group) break;
#pragma unroll
    for (int i = 0; i < E; ++i) wacc[(warp * group + g) * D + lane * E + i] = acc[g][i];
    if (lane == 0) {
      wml[2 * (warp * group + g)] = m[g];
      wml[2 * (warp * group + g) + 1] = l[g];
    }
  }
  __syncthreads();
  for (int g = 0; g < group; ++g) {
    float M = -INFINITY;
    for (int w = 0; w < kGqaWarps; ++w) M = fmaxf(M, wml[2 * (w * group + g)]);
    float L = 0.0f;
    float f[kGqaWarps];
    for (int w = 0; w < kGqaWarps; ++w) {
      f[w] = wml[2 * (w * group + g) + 1] > 0.0f ? __expf(wml[2 * (w * group + g)] - M) : 0.0f;
      L += wml[2 * (w * group + g) + 1] * f[w];
    }
    const int h = hk * group + g;
    const int64_t pi = (static_cast<int64_t>(t) * n_head + h) * n_splits + s;
    for (int e = threadIdx.x; e < D; e += blockDim.x) {
      float a = 0.0f;
      for (int w = 0; w < kGqaWarps; ++w)
        if (f[w] != 0.0f) a += wacc[(w * group + g) * D + e] * f[w];
      part_acc[pi * D + e] = a;
    }
    if (threadIdx.x == 0) part_ml[pi] = make_float2(M, L);
  }
}

// ---------------------------------------------------------------- tensor-core split-KV decode
//
// The decode kernel for f16 and q8_0 caches with head dims 64/128 (every released Qwen/Llama
// shape): the splits of attn_gqa_kernel, walked as (query, split) items by a grid of blocks
// (launch_mma_split), but the scores and P·V run on the tensor cores and every K/V byte moves
// coalesced. One block serves the query heads of one KV head (the rows of an m16 tile, zero past
// `group`, so group <= 16); each warp takes 16-key steps of the item's split in turn (warp w: keys
// j0 + 16 (w + 4 i)) and keeps its own online softmax:
// - the step's 16 K and V rows are copied whole into the warp's shared memory with cp.async
//   (f16: 16-byte pieces, consecutive lanes on consecutive pieces of a row; q8_0: the raw
//   34-byte blocks as 8- or 4-byte pieces), two steps in flight per warp;
// - S = Q K^T is one m16n8k16 per 8 keys and 16 dims (Q's fragments stay in registers, K's come
//   by ldmatrix), the row max is a shuffle within a quad, and P (rounded to f16 as FlashAttention
//   does) is already the A fragment of O += P V (V's fragments by ldmatrix.trans);
// - q8_0 K and V go from the raw stage straight into B fragments (mma_scores, mma_pv): one
//   32-bit word of quants per register pair, the dims permuted so that a lane's k columns (K) or
//   n columns (V) are the bytes of one word, Q's fragments and the output dims permuted alike
//   (q_frag_dim, o_frag_dim). With an f16 tile in shared memory between the two (dequantize,
//   store, ldmatrix) the q8_0 kernel took 32.0 us at 32768 keys against 25.3 us this way (7B
//   shape, docs/perf/2026-12-03-q8-decode.md);
// - the block's warps merge through shared memory and write one partial (m, l, acc) per query
//   head, merged across splits by attn_combine_kernel.
// Keys past the split end are masked (their rows repeat the last key's, so no unused block is
// read). q and P are rounded to f16; scores, softmax and accumulators are f32.

constexpr int kMmaWarps = 4;
constexpr int kMmaKeys = 16;        // keys per warp step
constexpr int kMmaRows = 16;        // query heads per block (m16)
constexpr int kMmaBlocksPerSm = 3;  // by shared memory (f16: ~70 KB a block at D = 128) and registers

// Shared memory of one K (or V) stage of 16 rows for cache type T. A warp has two stages in
// flight (four measured slower for q8_0, where shared memory would allow them).
template <int D, DType T>
struct MmaStage {
  static constexpr int kRowHalves = D + 8;     // padded f16 rows: conflict-free ldmatrix
  static constexpr int kRawRow = D / 32 * 34;  // q8_0 bytes of a row (4-byte multiple for D 64/128)
  static constexpr int kStageBytes = T == DType::F16 ? kMmaKeys * kRowHalves * 2 : kMmaKeys * kRawRow;
};

template <int D, DType KT, DType VT>
constexpr int mma_warp_bytes() {
  return 2 * (MmaStage<D, KT>::kStageBytes + MmaStage<D, VT>::kStageBytes);  // two stages of K and V
}
template <int D, DType KT, DType VT>
constexpr size_t mma_decode_smem() {
  constexpr size_t warps = static_cast<size_t>(kMmaWarps) * mma_warp_bytes<D, KT, VT>();
  constexpr size_t merge = static_cast<size_t>(kMmaWarps) * kMmaRows * (D + 2) * sizeof(float);
  return warps > merge ? warps : merge;
}

// Starts the copies of one step's 16 K (or V) rows (lane r & 15 holds row r's cell) into the
// warp's stage, consecutive lanes on consecutive pieces of a row: f16 rows as 16-byte pieces,
// q8_0 rows as 8-byte pieces (4-byte where the 34-byte blocks leave rows 4-byte aligned only).
template <int D, DType T>
__device__ __forceinline__ void mma_stage_rows(unsigned char* st, const char* base, int64_t nb2, int64_t cell,
                                               int lane) {
  using S = MmaStage<D, T>;
  if constexpr (T == DType::F16) {
    constexpr int kPieces = D / 8;
#pragma unroll
    for (int it = 0; it < kMmaKeys * kPieces / 32; ++it) {
      const int idx = it * 32 + lane, r = idx / kPieces, c = idx % kPieces;
      const int64_t cr = __shfl_sync(0xffffffffu, cell, r);
      cp_async16(st + r * S::kRowHalves * 2 + c * 16, base + cr * nb2 + c * 16);
    }
  } else {
    constexpr int kPiece = S::kRawRow % 8 == 0 ? 8 : 4;
    constexpr int kPieces = S::kRawRow / kPiece;
#pragma unroll 3
    for (int it = 0; it < (kMmaKeys * kPieces + 31) / 32; ++it) {
      const int idx = it * 32 + lane, r = min(idx / kPieces, kMmaKeys - 1), c = idx % kPieces;
      const int64_t cr = __shfl_sync(0xffffffffu, cell, r);
      if (idx < kMmaKeys * kPieces) {
        if constexpr (kPiece == 8) cp_async8(st + r * S::kRawRow + c * 8, base + cr * nb2 + c * 8);
        else cp_async4(st + r * S::kRawRow + c * 4, base + cr * nb2 + c * 4);
      }
    }
  }
}

// q8_0 rows straight into mma fragments, without an f16 tile. A staged row is D/32 blocks of 34
// bytes (f16 scale, 32 int8); block b's quants start at byte 34 b + 2 of the row, 4-byte aligned
// for odd b and 2 mod 4 for even b (rows start 4-byte aligned), so an even block's words are
// funnel-shifted out of two aligned ones. b is a compile-time constant after unrolling.
__device__ __forceinline__ uint32_t q8_word(const unsigned char* row, int b, int w) {
  const int off = 34 * b + 2 + 4 * w;
  if ((34 * b + 2) % 4 == 0) return *reinterpret_cast<const uint32_t*>(row + off);
  const uint32_t* p = reinterpret_cast<const uint32_t*>(row + off - 2);
  return __funnelshift_r(p[0], p[1], 16);
}
__device__ __forceinline__ __half q8_scale(const unsigned char* row, int b) {
  return *reinterpret_cast<const __half*>(row + 34 * b);
}

// The head dim of Q's A-fragment register i of k-step kk (lane quad qd). f16 K: the standard
// layout. q8_0 K: k-step kk = 2 b + c of block b, and lane qd's k columns (2 qd, 2 qd + 1,
// 2 qd + 8, 2 qd + 9) are the block's quants 8 qd + 4 c + (0, 1, 2, 3) — one 32-bit word of the
// staged row, so S = Q K^T sums the same products over a permutation of the dims.
template <DType KT>
__device__ __forceinline__ int q_frag_dim(int kk, int i, int qd) {
  if constexpr (KT == DType::F16) return kk * 16 + (i >> 1) * 8 + 2 * qd;
  else return (kk >> 1) * 32 + 8 * qd + 4 * (kk & 1) + (i >> 1) * 2;
}

// The head dim of accumulator column 2 qd + j of output n-tile n. f16 V: n 8 + 2 qd + j. q8_0 V:
// n-tile n = 4 b + t of block b takes byte t of each row's quant word, and B column g is word g,
// so column 2 qd + j is dim 32 b + 4 (2 qd + j) + t.
template <DType VT>
__device__ __forceinline__ int o_frag_dim(int n, int j, int qd) {
  if constexpr (VT == DType::F16) return n * 8 + 2 * qd + j;
  else return (n >> 2) * 32 + 4 * (2 * qd + j) + (n & 3);
}

// sc[n] += Q K^T for the step's keys n 8 .. n 8 + 7 (n = 0, 1) from the landed K stage.
template <int D, DType KT>
__device__ __forceinline__ void mma_scores(const unsigned char* kst, const uint32_t (&qa)[D / 16][4], float (&sc)[2][4],
                                           int lane) {
  constexpr int RH = D + 8;
  const int g = lane >> 2, qd = lane & 3;
  if constexpr (KT == DType::F16) {
    const __half* kt = reinterpret_cast<const __half*>(kst);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t kb[4];
      ldmatrix_x4(kb, kt + ((lane & 7) + (lane >> 4) * 8) * RH + kk * 16 + ((lane >> 3) & 1) * 8);
      mma16816(sc[0], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], kb[0], kb[1]);
      mma16816(sc[1], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], kb[2], kb[3]);
    }
  } else {
    constexpr int kRawRow = MmaStage<D, KT>::kRawRow;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const unsigned char* row = kst + (n * 8 + g) * kRawRow;  // key n 8 + g is this lane's B column
#pragma unroll
      for (int b = 0; b < D / 32; ++b) {
        const __half2 d = __half2half2(q8_scale(row, b));
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          uint32_t b0, b1;
          q8_widen4(q8_word(row, b, 2 * qd + c), d, b0, b1);
          const int kk = 2 * b + c;
          mma16816(sc[n], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b0, b1);
        }
      }
    }
  }
}

// o += P V for the step's 16 keys from the landed V stage; P is the A fragment (pa).
template <int D, DType VT>
__device__ __forceinline__ void mma_pv(const unsigned char* vst, const uint32_t (&pa)[4], float (&o)[D / 8][4],
                                       int lane) {
  constexpr int RH = D + 8;
  const int g = lane >> 2, qd = lane & 3;
  if constexpr (VT == DType::F16) {
    const __half* vt = reinterpret_cast<const __half*>(vst);
#pragma unroll
    for (int dn = 0; dn < D / 16; ++dn) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, vt + ((lane & 7) + ((lane >> 3) & 1) * 8) * RH + dn * 16 + (lane >> 4) * 8);
      mma16816(o[2 * dn], pa[0], pa[1], pa[2], pa[3], vb[0], vb[1]);
      mma16816(o[2 * dn + 1], pa[0], pa[1], pa[2], pa[3], vb[2], vb[3]);
    }
  } else {
    // B rows (keys) 2 qd, 2 qd + 1 make b[0], 2 qd + 8, 2 qd + 9 make b[1]; column g is quant word
    // g of the block, byte t of it belongs to n-tile 4 b + t.
    constexpr int kRawRow = MmaStage<D, VT>::kRawRow;
    const unsigned char* r0 = vst + 2 * qd * kRawRow;
    const unsigned char* r8 = r0 + 8 * kRawRow;
#pragma unroll
    for (int b = 0; b < D / 32; ++b) {
      const __half2 d01 = __halves2half2(q8_scale(r0, b), q8_scale(r0 + kRawRow, b));
      const __half2 d89 = __halves2half2(q8_scale(r8, b), q8_scale(r8 + kRawRow, b));
      const uint32_t u0 = q8_word(r0, b, g), u1 = q8_word(r0 + kRawRow, b, g);
      const uint32_t u8 = q8_word(r8, b, g), u9 = q8_word(r8 + kRawRow, b, g);
      uint32_t lo[4], hi[4];  // n-tile t: (lo[t], hi[t]) = (b[0], b[1])
      q8_widen4(__byte_perm(u0, u1, 0x5140), d01, lo[0], lo[1]);
      q8_widen4(__byte_perm(u0, u1, 0x7362), d01, lo[2], lo[3]);
      q8_widen4(__byte_perm(u8, u9, 0x5140), d89, hi[0], hi[1]);
      q8_widen4(__byte_perm(u8, u9, 0x7362), d89, hi[2], hi[3]);
#pragma unroll
      for (int t = 0; t < 4; ++t) mma16816(o[4 * b + t], pa[0], pa[1], pa[2], pa[3], lo[t], hi[t]);
    }
  }
}

// The (query, split) items of a decode launch: query t's active splits are items start[t] ..
// start[t + 1] - 1, start[T] items in all (T <= kDecodeMaxRows = two warps' worth of queries).
// Every thread of the block calls it; start[] is shared memory; invalid positions are reported
// when `report`.
__device__ __forceinline__ void decode_items(const Paged& pk, int T, int n_splits, int* start, ErrorSink sink,
                                             bool report) {
  static_assert(kDecodeMaxRows <= 64, "two warps scan the queries");
  __shared__ int warp_total;
  const int t = threadIdx.x, lane = t & 31;
  if (t < 64) {
    int a = 0;
    if (t < T) {
      const int32_t* row;
      a = active_splits(paged_query(pk, t, row, sink, report), n_splits);
    }
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, a, o);
      if (lane >= o) a += x;
    }
    if (t == 31) warp_total = a;
    start[t + 1] = a;  // inclusive within the warp; warp 1 adds warp 0's total below
  }
  if (t == 0) start[0] = 0;
  __syncthreads();
  if (t >= 32 && t < 64) start[t + 1] += warp_total;
  __syncthreads();
}

// Item i's query: the last t with start[t] <= i.
__device__ __forceinline__ int item_query(const int* start, int T, int i) {
  int lo = 0, hi = T - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (start[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

template <int D, DType KT, DType VT>
__global__ void __launch_bounds__(32 * kMmaWarps, kMmaBlocksPerSm)
    attn_mma_decode_kernel(TD q, TD k, TD v, Paged pk, float scale, int group, int hpb, int n_splits, float* part_acc,
                           float2* part_ml, ErrorSink sink) {
  using KS = MmaStage<D, KT>;
  using VS = MmaStage<D, VT>;
  extern __shared__ __align__(16) unsigned char msm[];
  __shared__ int start[kDecodeMaxRows + 1];
  decode_items(pk, static_cast<int>(q.ne[2]), n_splits, start, sink, blockIdx.x == 0 && blockIdx.y == 0);

  // The f16 kernel is at its register limit (168 for three blocks an SM): what an item needs is
  // derived inside the loop from a thread index the compiler cannot hoist, and the item count, T
  // and the item's query are re-read from shared memory, so that only `item` stays live from one
  // item to the next (held values spilled 40-48 bytes a thread).
  for (int item = blockIdx.x; item < start[q.ne[2]]; item += gridDim.x) {
    unsigned tid;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, qd = lane & 3;
    unsigned char* wsm = msm + warp * mma_warp_bytes<D, KT, VT>();
    unsigned char* kst = wsm;                        // K stages [2]
    unsigned char* vst = wsm + 2 * KS::kStageBytes;  // V stages [2]
    // Warp w serves KV head blockIdx.y * hpb + w % hpb and every (kMmaWarps / hpb)-th step of it.
    const int n_slots = kMmaWarps / hpb, slot = warp / hpb;
    const int hk = blockIdx.y * hpb + warp % hpb;
    const int n_head = gridDim.y * hpb * group;
    const int tq = item_query(start, static_cast<int>(q.ne[2]), item);  // the query (t below)
    int64_t j0, j1;
    const int32_t* row;
    split_range(paged_query(pk, tq, row, sink, false), item - start[tq], n_splits, j0, j1);

    // The first step's copies go out before the queries are read; the next step's table entries
    // are loaded one step ahead.
    const char* kbase = k.data + static_cast<int64_t>(hk) * k.nb[1];
    const char* vbase = v.data + static_cast<int64_t>(hk) * v.nb[1];
    const int64_t stride = static_cast<int64_t>(n_slots) * kMmaKeys;
    const auto stage = [&](int64_t j, int32_t entry, int b) {
      const int64_t cell = entry_cell(pk, entry, j, sink);
      mma_stage_rows<D, KT>(kst + b * KS::kStageBytes, kbase, k.nb[2], cell, lane);
      mma_stage_rows<D, VT>(vst + b * VS::kStageBytes, vbase, v.nb[2], cell, lane);
    };
    // This lane's key of the step at jc (its row lane & 15; past the split end, the last key).
    const auto key = [&](int64_t jc) { return min(jc + (lane & 15), j1 - 1); };
    int64_t jc = j0 + static_cast<int64_t>(slot) * kMmaKeys;
    if (jc < j1) stage(key(jc), table_entry(pk, row, key(jc)), 0);
    cp_async_commit();
    int32_t next = jc + stride < j1 ? table_entry(pk, row, key(jc + stride)) : 0;

    // Q's A fragments straight from the f32 rows (pre-scaled, rounded to f16; rows past the
    // group are zero): a[0] row g, a[1] row g + 8, a[2] / a[3] the same rows at the k columns
    // 8 on, each at the head dims q_frag_dim gives.
    uint32_t qa[D / 16][4];
    {
      const char* q0 = q.data + static_cast<int64_t>(hk * group + g) * q.nb[1] + static_cast<int64_t>(tq) * q.nb[2];
      const char* q1 = q0 + 8 * q.nb[1];
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = g + (i & 1) * 8, e = q_frag_dim<KT>(kk, i, qd);
          float2 x = make_float2(0.0f, 0.0f);
          if (r < group) x = *reinterpret_cast<const float2*>((i & 1 ? q1 : q0) + e * q.nb[0]);
          qa[kk][i] = pack_half2(x.x * scale, x.y * scale);
        }
    }

    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows g and g + 8

    for (int b = 0; jc < j1; jc += stride, b ^= 1) {
      if (jc + stride < j1) stage(key(jc + stride), next, b ^ 1);
      cp_async_commit();
      if (jc + 2 * stride < j1) next = table_entry(pk, row, key(jc + 2 * stride));
      cp_async_wait<1>();
      __syncwarp();

      float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      mma_scores<D, KT>(kst + b * KS::kStageBytes, qa, sc, lane);
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (jc + n * 8 + 2 * qd + (c & 1) >= j1) sc[n][c] = -INFINITY;
      float x0 = fmaxf(fmaxf(sc[0][0], sc[0][1]), fmaxf(sc[1][0], sc[1][1]));
      float x1 = fmaxf(fmaxf(sc[0][2], sc[0][3]), fmaxf(sc[1][2], sc[1][3]));
      x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
      x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
      x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
      x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
      const float n0 = fmaxf(m0, x0), n1 = fmaxf(m1, x1);  // finite: key jc is always visible
      const float c0 = __expf(m0 - n0), c1 = __expf(m1 - n1);
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        sc[n][0] = __expf(sc[n][0] - n0);
        sc[n][1] = __expf(sc[n][1] - n0);
        sc[n][2] = __expf(sc[n][2] - n1);
        sc[n][3] = __expf(sc[n][3] - n1);
      }
      l0 = l0 * c0 + (sc[0][0] + sc[0][1] + sc[1][0] + sc[1][1]);  // this lane's keys; the quad sums at the end
      l1 = l1 * c1 + (sc[0][2] + sc[0][3] + sc[1][2] + sc[1][3]);
      m0 = n0;
      m1 = n1;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= c0;
        o[n][1] *= c0;
        o[n][2] *= c1;
        o[n][3] *= c1;
      }
      const uint32_t pa[4] = {pack_half2(sc[0][0], sc[0][1]), pack_half2(sc[0][2], sc[0][3]),
                              pack_half2(sc[1][0], sc[1][1]), pack_half2(sc[1][2], sc[1][3])};
      mma_pv<D, VT>(vst + b * VS::kStageBytes, pa, o, lane);
      __syncwarp();  // every lane is done with stage b before the next step refills it
    }
    cp_async_wait<0>();
    const int t = item_query(start, static_cast<int>(q.ne[2]), item), s = item - start[t];
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);

    // This lane's accumulators of row g (h = 0) or g + 8 (h = 1) into dst[dim] (dims by o_frag_dim:
    // f16 V as float2 pairs, q8_0 V as float4 runs of a block's four n-tiles).
    const auto put_row = [&](float* dst, int h) {
      if constexpr (VT == DType::F16) {
#pragma unroll
        for (int n = 0; n < D / 8; ++n)
          *reinterpret_cast<float2*>(dst + o_frag_dim<VT>(n, 0, qd)) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
      } else {
#pragma unroll
        for (int b = 0; b < D / 32; ++b)
#pragma unroll
          for (int j = 0; j < 2; ++j)
            *reinterpret_cast<float4*>(dst + o_frag_dim<VT>(4 * b, j, qd)) =
                make_float4(o[4 * b][2 * h + j], o[4 * b + 1][2 * h + j], o[4 * b + 2][2 * h + j], o[4 * b + 3][2 * h + j]);
      }
    };
    // One partial (acc, m, l) per query head: straight from the warp when it alone covered its
    // head's keys of the split, else merged with the other slots' warps through shared memory.
    const auto part = [&](int r) { return (static_cast<int64_t>(t) * n_head + hk * group + r) * n_splits + s; };
    if (n_slots == 1) {
      if (g < group) put_row(part_acc + part(g) * D, 0);
      if (g + 8 < group) put_row(part_acc + part(g + 8) * D, 1);
      if (qd == 0 && g < group) part_ml[part(g)] = make_float2(m0, l0);
      if (qd == 0 && g + 8 < group) part_ml[part(g + 8)] = make_float2(m1, l1);
      continue;  // the warp's stages are its own: no barrier before the next item
    }
    __syncthreads();  // the stages are free now
    float* wo = reinterpret_cast<float*>(msm);   // [warps][kMmaRows][D]
    float* wml = wo + kMmaWarps * kMmaRows * D;  // [warps][kMmaRows] (m, l)
    put_row(wo + (warp * kMmaRows + g) * D, 0);
    put_row(wo + (warp * kMmaRows + g + 8) * D, 1);
    if (qd == 0) {
      *reinterpret_cast<float2*>(wml + 2 * (warp * kMmaRows + g)) = make_float2(m0, l0);
      *reinterpret_cast<float2*>(wml + 2 * (warp * kMmaRows + g + 8)) = make_float2(m1, l1);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < hpb * group * D; i += blockDim.x) {
      const int hw = i / (group * D), r = i / D % group, e = i % D;
      float M = -INFINITY;
      for (int sl = 0; sl < n_slots; ++sl) {
        const int w = sl * hpb + hw;
        if (wml[2 * (w * kMmaRows + r) + 1] > 0.0f) M = fmaxf(M, wml[2 * (w * kMmaRows + r)]);
      }
      float L = 0.0f, a = 0.0f;
      for (int sl = 0; sl < n_slots; ++sl) {
        const int w = sl * hpb + hw;
        const float lw = wml[2 * (w * kMmaRows + r) + 1];
        const float f = lw > 0.0f ? __expf(wml[2 * (w * kMmaRows + r)] - M) : 0.0f;
        L += lw * f;
        a += wo[(w * kMmaRows + r) * D + e] * f;
      }
      const int64_t pi = (static_cast<int64_t>(t) * n_head + (blockIdx.y * hpb + hw) * group + r) * n_splits + s;
      part_acc[pi * D + e] = a;
      if (e == 0) part_ml[pi] = make_float2(M, L);
    }
    __syncthreads();  // the merge buffer overlaps the next item's stages
  }
}

// Paged-cache view of an ATTENTION node's sources (pos, seq, block table) and its block size.
Paged paged_of(const Tensor& node, const Tensor& k) {
  const Tensor &pos = *node.src[3], &seq = *node.src[4], &table = *node.src[5];
  const int32_t bs = node.param<int32_t>(2);
  int32_t log2 = 0;
  while ((1 << log2) < bs) ++log2;
  if ((1 << log2) != bs) throw OpError("cuda ATTENTION: the block size must be a power of two, got " + std::to_string(bs));
  Paged pk;
  pk.pos = static_cast<const int32_t*>(pos.data);
  pk.seq = static_cast<const int32_t*>(seq.data);
  pk.table = static_cast<const int32_t*>(table.data);
  pk.max_blocks = static_cast<int32_t>(table.ne[0]);
  pk.n_rows = static_cast<int32_t>(table.ne[1]);
  pk.n_blocks = static_cast<int32_t>(k.ne[2] / bs);
  pk.bs_log2 = log2;
  return pk;
}

// The split count of the decode kernels: enough blocks to keep every SM streaming for one query
// at the longest sequence the table allows, at least 64 keys per split. It depends on no
// position and not on T: a query's split boundaries, and so its accumulation order, are the same
// in any batch (batch invariance, which speculative decoding and continuous batching rest on).
int decode_splits(const KernelContext& kc, const Paged& pk, int64_t heads, int64_t target_per_sm, int max_splits) {
  const int64_t max_len = static_cast<int64_t>(pk.max_blocks) << pk.bs_log2;
  const int64_t target_blocks = target_per_sm * static_cast<int64_t>(kc.prop->multiProcessorCount);
  const int64_t by_len = std::max<int64_t>(1, ceil_div(max_len, 64));
  return static_cast<int>(std::clamp<int64_t>(ceil_div(target_blocks, heads), 1, std::min<int64_t>(by_len, max_splits)));
}

// The split-KV kernels' partial results: `parts` accumulators of dv floats, then (m, l) pairs.
size_t split_acc_bytes(int64_t parts, int64_t dv) { return (static_cast<size_t>(parts * dv) * 4 + 255) / 256 * 256; }
size_t split_bytes(int64_t parts, int64_t dv) {
  return split_acc_bytes(parts, dv) + static_cast<size_t>(parts) * sizeof(float2);
}

// The split-KV kernels' partials in the node's workspace.
struct SplitParts {
  float* acc;
  float2* ml;
};
SplitParts split_parts(const KernelContext& kc, int64_t parts, int64_t dv) {
  char* s = static_cast<char*>(kc.scratch_bytes(split_bytes(parts, dv)));
  return {reinterpret_cast<float*>(s), reinterpret_cast<float2*>(s + split_acc_bytes(parts, dv))};
}

void launch_combine(KernelContext& kc, const float* part_acc, const float2* part_ml, const Paged& pk, int64_t n_head,
                    int64_t T, int n_splits, int64_t dv, float* out) {
  if (T == 1) {
    attn_combine_kernel<<<dim3(static_cast<unsigned>(n_head), 1, static_cast<unsigned>(ceil_div(dv, 32))),
                          32 * kCombineWarps, 0, kc.stream>>>(part_acc, part_ml, pk, n_splits, static_cast<int>(dv), out);
    kc.check_launch("attn_combine_kernel");
    return;
  }
  const unsigned blocks = static_cast<unsigned>(ceil_div(n_head * T, kCombineRowsWarps));
  const auto launch = [&](auto kernel) {
    kernel<<<blocks, 32 * kCombineRowsWarps, 0, kc.stream>>>(part_acc, part_ml, pk, n_splits, static_cast<int>(n_head),
                                                            static_cast<int>(T), static_cast<int>(dv), out);
  };
  if (dv <= 32) launch(attn_combine_rows_kernel<1>);
  else if (dv <= 64) launch(attn_combine_rows_kernel<2>);
  else if (dv <= 128) launch(attn_combine_rows_kernel<4>);
  else launch(attn_combine_rows_kernel<8>);  // dv <= 256 (kMaxDvPerLane)
  kc.check_launch("attn_combine_rows_kernel");
}

// The decode kernels (T <= kDecodeMaxRows): the tensor-core one, the GQA-grouped SIMT one (f32
// caches, head dim 256), or the per-head split kernel (anything else), and their split counts.
enum class DecodeKernel { MMA, GQA, SPLIT };

// KV heads per block of attn_mma_decode_kernel: as many as divide n_head_kv, up to its warps, so
// that the warps of a block read the neighbouring heads' rows of the same cells together (a
// cell's K row of all heads is one contiguous run of bytes).
int mma_heads_per_block(int64_t n_head_kv) {
  int h = kMmaWarps;
  while (n_head_kv % h != 0) h /= 2;
  return h;
}

// attn_mma_decode_kernel reads q as float2 and copies cache rows whole with cp.async: f16 rows in
// 16-byte pieces, q8_0 rows in 8-byte (head dim 128) or 4-byte (64) pieces. The cache's own
// layout always qualifies; other views go to the SIMT kernels.
bool mma_decode_layout_ok(const Tensor& q, const Tensor& k, const Tensor& v) {
  const auto bits = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data) | t.nb[1] | t.nb[2]; };
  const auto rows_ok = [&](const Tensor& t) {
    if (t.type == DType::F16) return t.nb[0] == 2 && bits(t) % 16 == 0;
    return t.type == DType::Q8_0 && bits(t) % (t.ne[0] / 32 * 34 % 8 == 0 ? 8 : 4) == 0;
  };
  return q.nb[0] == sizeof(float) && bits(q) % 8 == 0 && rows_ok(k) && rows_ok(v);
}

DecodeKernel decode_kernel(const Tensor& q, const Tensor& k, const Tensor& v, int group) {
  const int64_t d = q.ne[0], dv = v.ne[0];
  if (d == dv && (d == 64 || d == 128) && group <= kMmaRows && mma_decode_layout_ok(q, k, v)) return DecodeKernel::MMA;
  if (d == dv && group <= kGqaMax && (d == 64 || d == 128 || d == 256)) return DecodeKernel::GQA;
  return DecodeKernel::SPLIT;
}

int decode_kernel_splits(const KernelContext& kc, const Paged& pk, DecodeKernel dk, int64_t n_head, int64_t n_head_kv) {
  switch (dk) {
    case DecodeKernel::MMA: return decode_splits(kc, pk, n_head_kv / mma_heads_per_block(n_head_kv), kMmaBlocksPerSm, 256);
    case DecodeKernel::GQA: return decode_splits(kc, pk, n_head_kv, 4, 256);
    default: return decode_splits(kc, pk, n_head, 2, 64);
  }
}

template <int D, DType KT, DType VT>
void launch_gqa(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk, float scale,
                int group, float* out) {
  const int64_t n_head = q.ne[1], n_head_kv = k.ne[1], T = q.ne[2];
  const int n_splits = decode_kernel_splits(kc, pk, DecodeKernel::GQA, n_head, n_head_kv);
  const auto [part_acc, part_ml] = split_parts(kc, T * n_head * n_splits, D);
  const size_t merge = static_cast<size_t>(kGqaWarps) * group * (D + 2) * sizeof(float);
  const size_t stage = gqa_stages_v<D, VT>() ? static_cast<size_t>(kGqaWarps) * kChunkKeys * D * sizeof(__half) : 0;
  const size_t smem = std::max(merge, stage);
  static_assert(kGqaWarps * kGqaMax * (256 + 2) * sizeof(float) + kGqaMax * 256 * sizeof(float) <= 48 * 1024,
                "fits the default shared memory");
  static_assert(kGqaWarps * kChunkKeys * 128 * 2 + kGqaMax * 128 * sizeof(float) <= 48 * 1024,
                "the V stages fit the default shared memory");
  attn_gqa_kernel<D, KT, VT><<<dim3(n_splits, static_cast<unsigned>(n_head_kv), static_cast<unsigned>(T)),
                               32 * kGqaWarps, smem, kc.stream>>>(td(q), td(k), td(v), pk, scale, group, part_acc,
                                                                  part_ml, kc.sink());
  kc.check_launch("attn_gqa_kernel");
  launch_combine(kc, part_acc, part_ml, pk, n_head, T, n_splits, D, out);
}

// attn_mma_decode_kernel into the node's partials (n_splits of them per query head). The grid
// walks the active (query, split) items: one block per split of a single query (so one query at
// any depth has every split in flight), at most one wave of resident blocks for a batch (so the
// splits a batch of short sequences leaves empty cost no block launches; before, a grid of
// (splits, queries) put ~4,000 mostly empty blocks of ~70 KB of shared memory each through the
// SMs at T = 16 and depth 512: 15.5 us where the keys take ~5).
template <int D, DType KT, DType VT>
SplitParts launch_mma_split(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk,
                            float scale, int group, int& n_splits) {
  const int64_t n_head = q.ne[1], n_head_kv = k.ne[1], T = q.ne[2];
  const int hpb = mma_heads_per_block(n_head_kv);
  n_splits = decode_kernel_splits(kc, pk, DecodeKernel::MMA, n_head, n_head_kv);
  const SplitParts parts = split_parts(kc, T * n_head * n_splits, D);
  constexpr size_t smem = mma_decode_smem<D, KT, VT>();
  static bool raised = false;  // once per instantiation, before any graph capture
  if (!raised) {
    MINFER_CUDA_CHECK(cudaFuncSetAttribute(attn_mma_decode_kernel<D, KT, VT>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                      kc.where());
    raised = true;
  }
  const int64_t groups = n_head_kv / hpb;
  const int64_t resident = ceil_div(static_cast<int64_t>(kMmaBlocksPerSm) * kc.prop->multiProcessorCount, groups);
  const int64_t blocks = std::min<int64_t>(n_splits * T, std::max<int64_t>(resident, n_splits));
  attn_mma_decode_kernel<D, KT, VT><<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(groups)),
                                      32 * kMmaWarps, smem, kc.stream>>>(td(q), td(k), td(v), pk, scale, group, hpb,
                                                                         n_splits, parts.acc, parts.ml, kc.sink());
  kc.check_launch("attn_mma_decode_kernel");
  return parts;
}

template <int D, DType KT, DType VT>
void launch_mma_decode(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk,
                       float scale, int group, float* out) {
  int n_splits = 0;
  const SplitParts parts = launch_mma_split<D, KT, VT>(kc, q, k, v, pk, scale, group, n_splits);
  launch_combine(kc, parts.acc, parts.ml, pk, q.ne[1], q.ne[2], n_splits, D, out);
}

// ---------------------------------------------------------------- tiled prefill

constexpr int kTileQ = 16;   // queries per block (4 per warp)
constexpr int kTileK = 32;   // keys per tile (one per lane)
constexpr int kTileWarps = 4;
constexpr int kQPerWarp = kTileQ / kTileWarps;

// The prologue of both tiled kernels: each query's position (invalid ones reported and set to
// -1) and sequence, and the tile's queries, pre-scaled, in shared memory [kTileQ][d].
__device__ void load_query_tile(const TD& q, const Paged& pk, float scale, int h, int64_t t0, int d, int32_t* qpos,
                                int32_t* qseq, float* Qs, ErrorSink sink) {
  const int64_t T = q.ne[2];
  if (threadIdx.x < kTileQ) query_pos_seq(pk, t0 + threadIdx.x, T, sink, h == 0, qpos[threadIdx.x], qseq[threadIdx.x]);
  for (int i = threadIdx.x; i < kTileQ * d; i += blockDim.x) {
    const int qi = i / d, e = i % d;
    const int64_t t = t0 + qi;
    float x = 0.0f;
    if (t < T) x = *reinterpret_cast<const float*>(q.data + e * q.nb[0] + h * q.nb[1] + t * q.nb[2]) * scale;
    Qs[i] = x;
  }
  __syncthreads();
}

// The next run of the tile's queries that belong to one sequence, from query index `from`:
// [from, end) share qseq[from] (invalid queries, seq -1, form runs of their own that see nothing).
// Returns end and sets the run's visible key count.
__device__ __forceinline__ int next_run(const int32_t* qpos, const int32_t* qseq, int from, int& kv_max) {
  int end = from + 1;
  kv_max = qpos[from] + 1;
  while (end < kTileQ && qseq[end] == qseq[from]) kv_max = max(kv_max, qpos[end++] + 1);
  if (qseq[from] < 0) kv_max = 0;
  return end;
}

template <DType KT, DType VT>
__global__ void __launch_bounds__(32 * kTileWarps) attn_tile_kernel(TD q, TD k, TD v, Paged pk, float scale,
                                                                   int group, float* dst, ErrorSink sink) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(q.ne[0]), dv = static_cast<int>(v.ne[0]);
  const int dk = d + 1;  // padded K rows: lane j reads K[j][e] without bank conflicts
  float* Qs = smem;                   // [kTileQ][d]
  float* Ks = Qs + kTileQ * d;        // [kTileK][d + 1]
  float* Vs = Ks + kTileK * dk;       // [kTileK][dv]
  __shared__ int32_t qpos[kTileQ], qseq[kTileQ];
  __shared__ int64_t cells[kTileK];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int h = blockIdx.y, n_head = gridDim.y;
  const int64_t T = q.ne[2];
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kTileQ;
  const int hk = h / group;

  load_query_tile(q, pk, scale, h, t0, d, qpos, qseq, Qs, sink);

  float m[kQPerWarp], l[kQPerWarp], acc[kQPerWarp][kMaxDvPerLane];
#pragma unroll
  for (int a = 0; a < kQPerWarp; ++a) {
    m[a] = -INFINITY;
    l[a] = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxDvPerLane; ++i) acc[a][i] = 0.0f;
  }
  const char* kbase = k.data + static_cast<int64_t>(hk) * k.nb[1];
  const char* vbase = v.data + static_cast<int64_t>(hk) * v.nb[1];
  for (int r0 = 0; r0 < kTileQ;) {
    int kv_max;
    const int r1 = next_run(qpos, qseq, r0, kv_max);
    const int32_t* row = pk.table + static_cast<int64_t>(max(qseq[r0], 0)) * pk.max_blocks;
    for (int j0 = 0; j0 < kv_max; j0 += kTileK) {
      const int jn = min(kTileK, kv_max - j0);
      if (threadIdx.x < kTileK) cells[threadIdx.x] = threadIdx.x < jn ? paged_cell(pk, row, j0 + threadIdx.x, sink) : 0;
      __syncthreads();
      for (int i = threadIdx.x; i < kTileK * d; i += blockDim.x) {
        const int j = i / d, e = i % d;
        Ks[j * dk + e] = j < jn ? kv_elem<KT>(kbase + cells[j] * k.nb[2], e) : 0.0f;
      }
      for (int i = threadIdx.x; i < kTileK * dv; i += blockDim.x) {
        const int j = i / dv, e = i % dv;
        Vs[i] = j < jn ? kv_elem<VT>(vbase + cells[j] * v.nb[2], e) : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int a = 0; a < kQPerWarp; ++a) {
        const int qi = warp * kQPerWarp + a;
        const int32_t p = qi >= r0 && qi < r1 ? qpos[qi] : -1;
        if (p < j0) continue;  // warp-uniform: every key of this tile is masked (or another run's query)
        const float* qv = Qs + qi * d;
        const float* kr = Ks + lane * dk;
        float sc = 0.0f;
        for (int e = 0; e < d; ++e) sc += qv[e] * kr[e];
        const bool vis = j0 + lane <= p;
        if (!vis) sc = -INFINITY;
        const float m_new = fmaxf(m[a], warp_max(sc));
        const float pj = vis ? __expf(sc - m_new) : 0.0f;
        const float corr = __expf(m[a] - m_new);
        l[a] = l[a] * corr + warp_sum(pj);
#pragma unroll
        for (int i = 0; i < kMaxDvPerLane; ++i) acc[a][i] *= corr;
        for (int j = 0; j < kTileK; ++j) {
          const float pb = __shfl_sync(0xffffffffu, pj, j);
          const float* vr = Vs + j * dv;
#pragma unroll
          for (int i = 0; i < kMaxDvPerLane; ++i) {
            const int e = lane + 32 * i;
            if (e < dv) acc[a][i] += pb * vr[e];
          }
        }
        m[a] = m_new;
      }
      __syncthreads();
    }
    r0 = r1;
  }
#pragma unroll
  for (int a = 0; a < kQPerWarp; ++a) {
    const int64_t t = t0 + warp * kQPerWarp + a;
    if (t >= T) continue;
    float* out = dst + (t * n_head + h) * dv;
    const float inv = 1.0f / l[a];
#pragma unroll
    for (int i = 0; i < kMaxDvPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < dv) out[e] = acc[a][i] * inv;
    }
  }
}

// The same tiling specialised for head_dim == head_dim_v == D (64, 128, 256): lane l owns output
// dims [l * D/32, (l + 1) * D/32); the four queries of a warp are processed together, so each
// K and V element read from shared memory (as float4) serves four queries.
template <int D, DType KT, DType VT>
__global__ void __launch_bounds__(32 * kTileWarps) attn_tile_d_kernel(TD q, TD k, TD v, Paged pk, float scale,
                                                                     int group, float* dst, ErrorSink sink) {
  constexpr int EPL = D / 32;   // output dims per lane
  constexpr int DK = D + 4;     // padded K rows: 16-byte aligned, conflict-free float4 reads by row
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);  // [kTileQ][D]
  float* Ks = Qs + kTileQ * D;                  // [kTileK][DK]
  float* Vs = Ks + kTileK * DK;                 // [kTileK][D]
  float* Ps = Vs + kTileK * D;                  // [kTileWarps][kQPerWarp][kTileK]
  __shared__ int32_t qpos[kTileQ], qseq[kTileQ];
  __shared__ int64_t cells[kTileK];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int h = blockIdx.y, n_head = gridDim.y;
  const int64_t T = q.ne[2];
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kTileQ;
  const int hk = h / group;

  load_query_tile(q, pk, scale, h, t0, D, qpos, qseq, Qs, sink);
  float m[kQPerWarp], l[kQPerWarp], acc[kQPerWarp][EPL];
#pragma unroll
  for (int a = 0; a < kQPerWarp; ++a) {
    m[a] = -INFINITY;
    l[a] = 0.0f;
#pragma unroll
    for (int i = 0; i < EPL; ++i) acc[a][i] = 0.0f;
  }
  const char* kbase = k.data + static_cast<int64_t>(hk) * k.nb[1];
  const char* vbase = v.data + static_cast<int64_t>(hk) * v.nb[1];
  float* P = Ps + warp * kQPerWarp * kTileK;
  for (int r0 = 0; r0 < kTileQ;) {
    int kv_max;
    const int r1 = next_run(qpos, qseq, r0, kv_max);
    const int32_t* row = pk.table + static_cast<int64_t>(max(qseq[r0], 0)) * pk.max_blocks;
    int32_t p[kQPerWarp];
#pragma unroll
    for (int a = 0; a < kQPerWarp; ++a) {
      const int qi = warp * kQPerWarp + a;
      p[a] = qi >= r0 && qi < r1 ? qpos[qi] : -1;
    }
    int32_t pmax = p[0];
#pragma unroll
    for (int a = 1; a < kQPerWarp; ++a) pmax = max(pmax, p[a]);
    for (int j0 = 0; j0 < kv_max; j0 += kTileK) {
      const int jn = min(kTileK, kv_max - j0);
      if (threadIdx.x < kTileK) cells[threadIdx.x] = threadIdx.x < jn ? paged_cell(pk, row, j0 + threadIdx.x, sink) : 0;
      __syncthreads();
      for (int i = threadIdx.x; i < kTileK * D; i += blockDim.x) {
        const int j = i / D, e = i % D;
        const bool in = j < jn;
        Ks[j * DK + e] = in ? kv_elem<KT>(kbase + cells[j] * k.nb[2], e) : 0.0f;
        Vs[i] = in ? kv_elem<VT>(vbase + cells[j] * v.nb[2], e) : 0.0f;
      }
      __syncthreads();
      if (pmax >= j0) {  // warp-uniform: some query of this warp sees a key of this tile
        float sc[kQPerWarp];
#pragma unroll
        for (int a = 0; a < kQPerWarp; ++a) sc[a] = 0.0f;
        const float4* kr = reinterpret_cast<const float4*>(Ks + lane * DK);
#pragma unroll 8
        for (int e4 = 0; e4 < D / 4; ++e4) {
          const float4 kk = kr[e4];
#pragma unroll
          for (int a = 0; a < kQPerWarp; ++a) {
            const float4 qq = reinterpret_cast<const float4*>(Qs + (warp * kQPerWarp + a) * D)[e4];
            sc[a] += qq.x * kk.x + qq.y * kk.y + qq.z * kk.z + qq.w * kk.w;
          }
        }
#pragma unroll
        for (int a = 0; a < kQPerWarp; ++a) {
          const bool vis = j0 + lane <= p[a];
          const float s = vis ? sc[a] : -INFINITY;
          const float m_new = fmaxf(m[a], warp_max(s));
          const float pj = vis ? __expf(s - m_new) : 0.0f;
          const float corr = m_new == -INFINITY ? 1.0f : __expf(m[a] - m_new);
          l[a] = l[a] * corr + warp_sum(pj);
#pragma unroll
          for (int i = 0; i < EPL; ++i) acc[a][i] *= corr;
          m[a] = m_new;
          P[a * kTileK + lane] = pj;
        }
        __syncwarp();
#pragma unroll 4
        for (int j = 0; j < kTileK; ++j) {
          float vv[EPL];
          const float* vr = Vs + j * D + lane * EPL;
          if constexpr (EPL == 2) {
            const float2 t2 = *reinterpret_cast<const float2*>(vr);
            vv[0] = t2.x; vv[1] = t2.y;
          } else {
#pragma unroll
            for (int i4 = 0; i4 < EPL / 4; ++i4) {
              const float4 t4 = reinterpret_cast<const float4*>(vr)[i4];
              vv[4 * i4] = t4.x; vv[4 * i4 + 1] = t4.y; vv[4 * i4 + 2] = t4.z; vv[4 * i4 + 3] = t4.w;
            }
          }
#pragma unroll
          for (int a = 0; a < kQPerWarp; ++a) {
            const float pj = P[a * kTileK + j];
#pragma unroll
            for (int i = 0; i < EPL; ++i) acc[a][i] += pj * vv[i];
          }
        }
      }
      __syncthreads();
    }
    r0 = r1;
  }
#pragma unroll
  for (int a = 0; a < kQPerWarp; ++a) {
    const int64_t t = t0 + warp * kQPerWarp + a;
    if (t >= T) continue;
    float* out = dst + (t * n_head + h) * D + lane * EPL;
    const float inv = 1.0f / l[a];
#pragma unroll
    for (int i = 0; i < EPL; ++i) out[i] = acc[a][i] * inv;
  }
}

template <int D, DType KT, DType VT>
void launch_tile_d(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk, float scale,
                   int group, float* out) {
  const size_t smem = (static_cast<size_t>(kTileQ) * D + static_cast<size_t>(kTileK) * (D + 4) +
                       static_cast<size_t>(kTileK) * D + static_cast<size_t>(kTileWarps) * kQPerWarp * kTileK) *
                      sizeof(float);
  if (smem > 48 * 1024) {
    static bool raised = false;
    if (!raised) {
      MINFER_CUDA_CHECK(cudaFuncSetAttribute(attn_tile_d_kernel<D, KT, VT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)),
                        kc.where());
      raised = true;
    }
  }
  const int64_t T = q.ne[2], n_head = q.ne[1];
  attn_tile_d_kernel<D, KT, VT><<<dim3(static_cast<unsigned>(ceil_div(T, kTileQ)), static_cast<unsigned>(n_head)),
                                  32 * kTileWarps, smem, kc.stream>>>(td(q), td(k), td(v), pk, scale, group, out, kc.sink());
  kc.check_launch("attn_tile_d_kernel");
}

template <DType KT, DType VT>
void launch_attention(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk,
                      float scale, Tensor& dst) {
  const int64_t d = q.ne[0], dv = v.ne[0], n_head = q.ne[1], n_head_kv = k.ne[1], T = q.ne[2];
  const int group = static_cast<int>(n_head / k.ne[1]);
  float* out = static_cast<float*>(dst.data);
  const DecodeKernel dk = decode_kernel(q, k, v, group);
  if (T <= kDecodeMaxRows && dk == DecodeKernel::MMA) {
    if constexpr (KT != DType::F32 && VT != DType::F32) {
      if (d == 64) return launch_mma_decode<64, KT, VT>(kc, q, k, v, pk, scale, group, out);
      return launch_mma_decode<128, KT, VT>(kc, q, k, v, pk, scale, group, out);
    }
  }
  if (T <= kDecodeMaxRows && dk == DecodeKernel::GQA) {
    if (d == 64) return launch_gqa<64, KT, VT>(kc, q, k, v, pk, scale, group, out);
    if (d == 128) return launch_gqa<128, KT, VT>(kc, q, k, v, pk, scale, group, out);
    return launch_gqa<256, KT, VT>(kc, q, k, v, pk, scale, group, out);
  }
  if (T <= kDecodeMaxRows) {
    const int n_splits = decode_kernel_splits(kc, pk, DecodeKernel::SPLIT, n_head, n_head_kv);
    const auto [part_acc, part_ml] = split_parts(kc, T * n_head * n_splits, dv);
    const size_t smem = (static_cast<size_t>(d) + kSplitWarps * dv + 2 * kSplitWarps) * sizeof(float);
    attn_split_kernel<KT, VT><<<dim3(n_splits, static_cast<unsigned>(n_head), static_cast<unsigned>(T)),
                                32 * kSplitWarps, smem, kc.stream>>>(td(q), td(k), td(v), pk, scale, group, part_acc,
                                                                     part_ml, kc.sink());
    kc.check_launch("attn_split_kernel");
    launch_combine(kc, part_acc, part_ml, pk, n_head, T, n_splits, dv, out);
    return;
  }
  if (launch_fa(kc, q, k, v, pk, scale, group, out)) return;  // f16/q8_0, head dims 64/128 (k_attention_fa.cu)
  if (d == dv && (d == 64 || d == 128 || d == 256)) {
    if (d == 64) return launch_tile_d<64, KT, VT>(kc, q, k, v, pk, scale, group, out);
    if (d == 128) return launch_tile_d<128, KT, VT>(kc, q, k, v, pk, scale, group, out);
    return launch_tile_d<256, KT, VT>(kc, q, k, v, pk, scale, group, out);
  }
  const size_t smem = (static_cast<size_t>(kTileQ) * d + static_cast<size_t>(kTileK) * (d + 1) +
                       static_cast<size_t>(kTileK) * dv) * sizeof(float);
  if (smem > 48 * 1024) {
    if (smem > static_cast<size_t>(kc.prop->sharedMemPerBlockOptin))
      throw OpError(kc.where() + ": head dims too large for the attention kernel's shared memory");
    // Raised once per instantiation (outside any later graph capture) to the most this kernel can
    // take: the opt-in limit minus its static shared memory.
    static bool raised = false;
    if (!raised) {
      cudaFuncAttributes fa{};
      MINFER_CUDA_CHECK(cudaFuncGetAttributes(&fa, attn_tile_kernel<KT, VT>), kc.where());
      const size_t max_dyn = static_cast<size_t>(kc.prop->sharedMemPerBlockOptin) - fa.sharedSizeBytes;
      if (smem > max_dyn) throw OpError(kc.where() + ": head dims too large for the attention kernel's shared memory");
      MINFER_CUDA_CHECK(cudaFuncSetAttribute(attn_tile_kernel<KT, VT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(max_dyn)),
                        kc.where());
      raised = true;
    }
  }
  attn_tile_kernel<KT, VT><<<dim3(static_cast<unsigned>(ceil_div(T, kTileQ)), static_cast<unsigned>(n_head)),
                             32 * kTileWarps, smem, kc.stream>>>(td(q), td(k), td(v), pk, scale, group, out, kc.sink());
  kc.check_launch("attn_tile_kernel");
}

template <DType KT>
void dispatch_v(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk, float scale,
                Tensor& dst) {
  switch (v.type) {
    case DType::F32: return launch_attention<KT, DType::F32>(kc, q, k, v, pk, scale, dst);
    case DType::F16: return launch_attention<KT, DType::F16>(kc, q, k, v, pk, scale, dst);
    case DType::Q8_0: return launch_attention<KT, DType::Q8_0>(kc, q, k, v, pk, scale, dst);
    default: throw OpError(kc.where() + ": v dtype not supported");
  }
}

}  // namespace

void k_kv_store(KernelContext& kc, Tensor& dst) {
  const Tensor& cache = *dst.src[0];
  const Tensor& x = *dst.src[1];
  const Tensor& cells = *dst.src[2];
  if (!cells.is_contiguous()) throw OpError(kc.where() + ": cells must be contiguous");
  const int64_t rows = x.ne[1] * x.ne[2];
  if (rows == 0) return;
  const unsigned g = static_cast<unsigned>(rows);
  const auto* c = static_cast<const int32_t*>(cells.data);
  switch (cache.type) {
    case DType::F32: kv_store_kernel<DType::F32><<<g, row_threads(x.ne[0]), 0, kc.stream>>>(td(x), td(cache), c, kc.sink()); break;
    case DType::F16: kv_store_kernel<DType::F16><<<g, row_threads(x.ne[0]), 0, kc.stream>>>(td(x), td(cache), c, kc.sink()); break;
    case DType::Q8_0:
      if (x.ne[0] % 32 != 0) throw OpError(kc.where() + ": a q8_0 cache needs head_dim % 32 == 0");
      kv_store_kernel<DType::Q8_0><<<g, 128, 0, kc.stream>>>(td(x), td(cache), c, kc.sink());
      break;
    default: throw OpError(kc.where() + ": cache dtype not supported");
  }
  kc.check_launch("kv_store_kernel");
}

size_t w_attention(const KernelContext& kc, const Tensor& dst) {
  const Tensor &q = *dst.src[0], &k = *dst.src[1], &v = *dst.src[2];
  const int64_t d = q.ne[0], dv = v.ne[0], n_head = q.ne[1], T = q.ne[2];
  if (T == 0 || n_head == 0 || T > kDecodeMaxRows || k.ne[1] == 0) return 0;
  const int group = static_cast<int>(n_head / k.ne[1]);
  const Paged pk = paged_of(dst, k);
  // q's address is not known when the workspace is planned: room for the kernel it would get if
  // misaligned too (mma_decode_layout_ok), whichever needs more.
  const int64_t parts = T * n_head;
  size_t bytes = 0;
  for (DecodeKernel dk : {decode_kernel(q, k, v, group), DecodeKernel::GQA, DecodeKernel::SPLIT})
    bytes = std::max(bytes, split_bytes(parts * decode_kernel_splits(kc, pk, dk, n_head, k.ne[1]), dv));
  return bytes;
}

void k_attention(KernelContext& kc, Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  for (int i = 3; i <= 5; ++i)
    if (!dst.src[i]->is_contiguous()) throw OpError(kc.where() + ": pos, seq and the block table must be contiguous");
  if (v.ne[0] > 32 * kMaxDvPerLane) throw OpError(kc.where() + ": head_dim_v > 256 is not supported");
  if (q.ne[2] == 0 || q.ne[1] == 0) return;
  const float scale = dst.param<float>(0);
  const Paged pk = paged_of(dst, k);
  switch (k.type) {
    case DType::F32: return dispatch_v<DType::F32>(kc, q, k, v, pk, scale, dst);
    case DType::F16: return dispatch_v<DType::F16>(kc, q, k, v, pk, scale, dst);
    case DType::Q8_0: return dispatch_v<DType::Q8_0>(kc, q, k, v, pk, scale, dst);
    default: throw OpError(kc.where() + ": k dtype not supported");
  }
}

}  // namespace minfer::cuda
