// Mixture-of-experts kernels: TOP_K, MUL_MAT_ID and the fused MOE_SUM (the rewrite's slot sum +
// residual). TOP_K and MUL_MAT_ID have the semantics of ops/cpu/k_moe.cpp; the
// expert ids are read on the device only (nothing goes back to the host during compute), so a
// captured graph replays for any routing.
//
// MUL_MAT_ID of up to kMmvqRows tokens (decode) runs every (token, slot) pair as one
// matrix-vector product with its expert's slice: block weights through the MMVQ machinery (mmvq_id
// in k_mmvq.cu: q8_1 activations, dp4a; a pair's bits are the decode mul_mat's), float weights
// through a warp-per-row f32 matvec. Past that (prefill, many sequences) pair-by-pair would read
// an expert's rows once per pair that selected it, so the pairs are grouped by expert on the device
// (moe_plan_kernel) and each expert's group runs as tensor-core MMQ tiles (mmq_grouped in
// k_mmq.cu), reading the expert's rows once per tile of up to kGroupTile pairs.
#include <algorithm>
#include <cmath>

#include "ops/cuda/kernels.cuh"
#include "ops/cuda/quant_device.cuh"

namespace minfer::cuda {
namespace {


// ---------------------------------------------------------------- top_k

// The order as one 64-bit key, larger = ranked first: the value's bits mapped so unsigned order is
// float order (-0 as +0, every NaN above +inf), then 2^31 - 1 - index (lower index first; the top
// bit stays clear, so no key equals ~0, the sentinel above every key).
__device__ __forceinline__ unsigned long long rank_key(float v, int i) {
  uint32_t u;
  if (isnan(v)) {
    u = 0xffffffffu;
  } else {
    const uint32_t b = __float_as_uint(v == 0.0f ? 0.0f : v);
    u = (b & 0x80000000u) ? ~b : b | 0x80000000u;
  }
  return (static_cast<unsigned long long>(u) << 32) | (0x7fffffffu - static_cast<uint32_t>(i));
}

// One warp per row. Pick r is the largest key below pick r - 1's (the order is strict and total,
// so nothing needs marking): each lane takes its best candidate, then a butterfly max leaves the
// same key in every lane. Rows of up to 32 R elements (R > 0: router rows of up to 256 experts)
// are held in registers as keys, read once; a row reread from memory for each of the k picks made
// the kernel a chain of dependent loads (~10 us for 128 experts, k = 8).
template <int R>
__global__ void top_k_kernel(TD x, int64_t k, int32_t* dst) {
  const int lane = threadIdx.x;
  int64_t i1, i2, i3;
  split_row(blockIdx.x, x.ne, i1, i2, i3);
  const char* row = td_row(x, i1, i2, i3);
  const int n = static_cast<int>(x.ne[0]);
  auto key = [&](int i) { return rank_key(*reinterpret_cast<const float*>(row + i * x.nb[0]), i); };
  unsigned long long held[R > 0 ? R : 1];
  if constexpr (R > 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) held[r] = lane + 32 * r < n ? key(lane + 32 * r) : 0ull;
  }
  unsigned long long prev = ~0ull;  // above every key
  for (int64_t r = 0; r < k; ++r) {
    unsigned long long best = 0;  // below every key
    if constexpr (R > 0) {
#pragma unroll
      for (int j = 0; j < R; ++j)
        if (held[j] < prev && held[j] > best) best = held[j];
    } else {
      for (int i = lane; i < n; i += 32) {
        const unsigned long long c = key(i);
        if (c < prev && c > best) best = c;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned long long other = __shfl_xor_sync(0xffffffffu, best, o);
      best = other > best ? other : best;
    }
    if (lane == 0) dst[static_cast<int64_t>(blockIdx.x) * k + r] = static_cast<int32_t>(0x7fffffffu - static_cast<uint32_t>(best));
    prev = best;
  }
}

// ---------------------------------------------------------------- mul_mat_id, float weights

constexpr int kFloatRowsPerBlock = 4;  // one warp per weight row

// Weights widened exactly and multiplied by the f32 activations in f32, as the CPU does.
__global__ void mm_id_float_kernel(TD as, DType at, TD ids, TD b, DType bt, int64_t slot0, float* dst, ErrorSink sink) {
  const int lane = threadIdx.x & 31;
  const int64_t M = as.ne[1], K = as.ne[0];
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kFloatRowsPerBlock + (threadIdx.x >> 5);
  if (m >= M) return;
  const int64_t s = slot0 + blockIdx.y, k = ids.ne[0], j = s % k, t = s / k;
  const int32_t e = *reinterpret_cast<const int32_t*>(ids.data + j * ids.nb[0] + t * ids.nb[1]);
  if (e < 0 || e >= as.ne[2]) {
    if (m == 0 && lane == 0) report_error(sink, kErrMulMatIdId, e, as.ne[2]);
    if (lane == 0) dst[s * M + m] = __int_as_float(0x7fc00000);
    return;
  }
  const char* w = as.data + m * as.nb[1] + static_cast<int64_t>(e) * as.nb[2];
  const char* xr = b.data + (j % b.ne[1]) * b.nb[1] + t * b.nb[2];
  float acc = 0.0f;
  for (int64_t i = lane; i < K; i += 32)
    acc = __fmaf_rn(load_scalar(at, w + i * as.nb[0]), load_scalar(bt, xr + i * b.nb[0]), acc);
  const float v = warp_sum(acc);
  if (lane == 0) dst[s * M + m] = v;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// ---------------------------------------------------------------- mul_mat_id, grouped by expert

constexpr int64_t kPlanMaxExperts = 4096;  // the plan's two counters per expert live in shared memory
constexpr int kPlanThreads = 1024;

// The plan's workspace: the tile count (16 bytes, so the tiles stay int4-aligned), max_tiles
// tiles, then the pair order.
struct PlanLayout {
  int64_t pairs, max_tiles;
  size_t bytes() const { return align256(16 + 16 * static_cast<size_t>(max_tiles) + 4 * static_cast<size_t>(pairs)); }
};

PlanLayout plan_layout(const Tensor& as, const Tensor& ids) {
  const int64_t pairs = ids.ne[0] * ids.ne[1];
  return {pairs, ceil_div(pairs, kGroupTile) + std::min(as.ne[2], pairs)};
}

bool grouped(const Tensor& dst) {
  const Tensor &as = *dst.src[0], &ids = *dst.src[1];
  return ids.ne[1] > kMmvqRows && mmq_supported(as.type) && as.ne[2] <= kPlanMaxExperts;
}

// One block: the pairs counted per expert, the tiles cut serially by thread 0 (a few hundred
// experts at most), then every valid pair placed in its expert's range. Places within an expert
// follow atomic order, which is harmless: a pair's sums depend on its own row only (mmq_grouped).
// A bad id is reported and its pair's output row set to NaN; the pair joins no tile.
__global__ void __launch_bounds__(kPlanThreads) moe_plan_kernel(TD ids, int64_t n_expert, int64_t M, int32_t* n_tiles,
                                                                int4* tiles, int32_t* order, float* dst,
                                                                ErrorSink sink) {
  extern __shared__ int counters[];  // [n_expert] pairs per expert, then [n_expert] next free place
  int* next = counters + n_expert;
  const int64_t k = ids.ne[0], pairs = k * ids.ne[1];
  auto expert_of = [&](int64_t s) {
    return *reinterpret_cast<const int32_t*>(ids.data + (s % k) * ids.nb[0] + (s / k) * ids.nb[1]);
  };
  for (int64_t e = threadIdx.x; e < n_expert; e += blockDim.x) counters[e] = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < pairs; s += blockDim.x) {
    const int32_t e = expert_of(s);
    if (e >= 0 && e < n_expert) {
      atomicAdd(&counters[e], 1);
    } else {
      report_error(sink, kErrMulMatIdId, e, n_expert);
      for (int64_t m = 0; m < M; ++m) dst[s * M + m] = __int_as_float(0x7fc00000);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int first = 0, nt = 0;
    for (int e = 0; e < n_expert; ++e) {
      next[e] = first;
      for (int p = 0; p < counters[e]; p += kGroupTile) tiles[nt++] = make_int4(e, first + p, min(kGroupTile, counters[e] - p), 0);
      first += counters[e];
    }
    *n_tiles = nt;
  }
  __syncthreads();
  for (int64_t s = threadIdx.x; s < pairs; s += blockDim.x) {
    const int32_t e = expert_of(s);
    if (e >= 0 && e < n_expert) order[atomicAdd(&next[e], 1)] = static_cast<int32_t>(s);
  }
}

// ---------------------------------------------------------------- moe_sum

constexpr int kMoeSumThreads = 256;

// Where MOE_SUM's slot weights come from: w [1, k, T] itself, or (route) the softmax over the
// selected router logits l[ids[j, t], t] that GET_ROWS + SOFT_MAX (scale 1) would have made.
struct MoeWeights {
  TD w;
  TD ids;
  bool route;
};

// Slot j's weight for token t into ws[j] (j < k <= 32), computed by warp 0 of the block. The
// routed form is soft_max_kernel's arithmetic on a k-element row with one warp (row_threads
// gives 32 threads for k <= 32): lane j holds l_j, the max and the sum of expf(l - max) are warp
// butterflies (block_max / block_sum of one warp add only -inf and 0 to them), and the weight is
// expf(l - max) * (1 / sum). So the bits are the basic ops'.
__device__ void moe_slot_weights(const MoeWeights& mw, int64_t k, int64_t t, float* ws) {
  const int lane = threadIdx.x & 31;
  if (threadIdx.x >= 32) return;
  if (!mw.route) {
    if (lane < k) ws[lane] = *reinterpret_cast<const float*>(mw.w.data + lane * mw.w.nb[1] + t * mw.w.nb[2]);
    return;
  }
  float v = 0.0f, mx = -INFINITY;
  if (lane < k) {
    const int32_t e = *reinterpret_cast<const int32_t*>(mw.ids.data + lane * mw.ids.nb[0] + t * mw.ids.nb[1]);
    // top_k's ids are in range; anything else poisons the slot rather than reading out of bounds.
    v = e >= 0 && e < mw.w.ne[0] ? *reinterpret_cast<const float*>(mw.w.data + e * mw.w.nb[0] + t * mw.w.nb[1])
                                 : __int_as_float(0x7fc00000);
    mx = fmaxf(mx, v);
  }
  mx = warp_max(mx);
  const float sum = warp_sum(lane < k ? expf(v - mx) : 0.0f);
  const float inv = 1.0f / sum;
  if (lane < k) ws[lane] = expf(v - mx) * inv;
}

// dst[:, t] = (r[:, t] +) sum over j of y[:, j, t] * w[j, t], each product rounded and the sum
// taken in slot order, as the basic ops compute it (MUL, then the ADD chain over the slots, then
// the residual ADD): the explicit _rn forms keep the compiler from contracting them into FMAs.
__global__ void __launch_bounds__(kMoeSumThreads) moe_sum_kernel(TD y, MoeWeights mw, TD r, bool has_r, int64_t n,
                                                                 float* dst) {
  __shared__ float ws[32];
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kMoeSumThreads + threadIdx.x, t = blockIdx.y;
  const int64_t k = y.ne[1];
  moe_slot_weights(mw, k, t, ws);
  __syncthreads();
  if (e >= n) return;
  const char* yt = y.data + t * y.nb[2] + e * y.nb[0];
  float s = 0.0f;
#pragma unroll 8
  for (int64_t j = 0; j < k; ++j) {
    const float p = __fmul_rn(*reinterpret_cast<const float*>(yt + j * y.nb[1]), ws[j]);
    s = j == 0 ? p : __fadd_rn(s, p);
  }
  if (has_r) s = __fadd_rn(*reinterpret_cast<const float*>(r.data + e * r.nb[0] + t * r.nb[1]), s);
  dst[t * n + e] = s;
}

}  // namespace

bool s_moe_sum(const Tensor& dst) {
  const Tensor *y = dst.src[0], *w = dst.src[1], *r = dst.src[2], *ids = dst.src[3];
  if (!y || !w || y->type != DType::F32 || w->type != DType::F32 || dst.type != DType::F32 || !dst.is_contiguous())
    return false;
  const int64_t k = y->ne[1], T = y->ne[2];
  if (k < 1 || k > 32 || y->ne[3] != 1) return false;  // a slot weight per lane of one warp
  if (ids) {
    // w: the router logits [n_expert, T]; ids: I32 [k, T].
    if (ids->type != DType::I32 || ids->ne[0] != k || ids->ne[1] != T || ids->ne[2] != 1 || ids->ne[3] != 1) return false;
    if (w->ne[1] != T || w->ne[2] != 1 || w->ne[3] != 1) return false;
  } else if (w->ne[0] != 1 || w->ne[1] != k || w->ne[2] != T || w->ne[3] != 1) {
    return false;
  }
  if (dst.ne[0] != y->ne[0] || dst.ne[1] != T || dst.ne[2] != 1 || dst.ne[3] != 1) return false;
  if (T > 65535) return false;  // grid y
  return !r || (r->type == DType::F32 && same_shape(*r, dst));
}

void k_moe_sum(KernelContext& kc, Tensor& dst) {
  const Tensor &y = *dst.src[0], &w = *dst.src[1];
  const int64_t n = y.ne[0], T = y.ne[2];
  if (n == 0 || T == 0) return;
  const Tensor *r = dst.src[2], *ids = dst.src[3];
  const MoeWeights mw{td(w), ids ? td(*ids) : td(w), ids != nullptr};
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kMoeSumThreads)), static_cast<unsigned>(T));
  moe_sum_kernel<<<grid, kMoeSumThreads, 0, kc.stream>>>(td(y), mw, r ? td(*r) : td(y), r != nullptr, n,
                                                         static_cast<float*>(dst.data));
  kc.check_launch("moe_sum_kernel");
}

void k_top_k(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const int64_t rows = x.nrows();
  if (rows == 0) return;
  const auto grid = static_cast<unsigned>(rows);
  auto* out = static_cast<int32_t*>(dst.data);
  if (x.ne[0] <= 64) top_k_kernel<2><<<grid, 32, 0, kc.stream>>>(td(x), dst.ne[0], out);
  else if (x.ne[0] <= 256) top_k_kernel<8><<<grid, 32, 0, kc.stream>>>(td(x), dst.ne[0], out);
  else top_k_kernel<0><<<grid, 32, 0, kc.stream>>>(td(x), dst.ne[0], out);
  kc.check_launch("top_k_kernel");
}

bool s_mul_mat_id(const Tensor& dst) {
  const Tensor& as = *dst.src[0];
  const Tensor& b = *dst.src[2];
  if (b.type != DType::F32 && b.type != DType::F16) return false;
  if (!is_float(as.type) && !mmvq_supported(as.type)) return false;
  return as.nb[0] == dtype_type_size(as.type);
}

size_t w_mul_mat_id(const KernelContext&, const Tensor& dst) {
  const Tensor &as = *dst.src[0], &ids = *dst.src[1], &b = *dst.src[2];
  if (is_float(as.type)) return 0;
  const size_t planes = q8_plane_bytes(b.ne[1] * b.ne[2], as.ne[0]);
  return grouped(dst) ? planes + plan_layout(as, ids).bytes() : planes;
}

void k_mul_mat_id(KernelContext& kc, Tensor& dst) {
  const Tensor& as = *dst.src[0];
  const Tensor& ids = *dst.src[1];
  const Tensor& b = *dst.src[2];
  const int64_t K = as.ne[0], M = as.ne[1], slots = ids.ne[0] * ids.ne[1];
  if (M == 0 || slots == 0) return;
  float* out = static_cast<float*>(dst.data);
  if (is_float(as.type)) {
    constexpr int64_t kMaxGridY = 65535;
    for (int64_t s0 = 0; s0 < slots; s0 += kMaxGridY) {
      const dim3 grid(static_cast<unsigned>(ceil_div(M, kFloatRowsPerBlock)),
                      static_cast<unsigned>(std::min(kMaxGridY, slots - s0)));
      mm_id_float_kernel<<<grid, 32 * kFloatRowsPerBlock, 0, kc.stream>>>(td(as), as.type, td(ids), td(b), b.type, s0,
                                                                          out, kc.sink());
      kc.check_launch("mm_id_float_kernel");
    }
    return;
  }
  // The activations once as q8_1 planes (qs [rows][K] int8, ds [rows][K/32] float2), rows = the
  // n_act rows of every token, as the decode mul_mat quantizes them.
  const int64_t rows = b.ne[1] * b.ne[2];
  const size_t planes = q8_plane_bytes(rows, K);
  const bool by_expert = grouped(dst);
  const PlanLayout plan = plan_layout(as, ids);
  char* s = static_cast<char*>(kc.scratch_bytes(by_expert ? planes + plan.bytes() : planes));
  const auto [qs, ds] = q8_planes(s, rows, K);
  quantize_q8_1(kc, td(b), b.type, qs, ds);
  if (!by_expert) return mmvq_id(kc, as, ids, qs, ds, b.ne[1], out);
  char* p = s + planes;
  MmqGroups grp;
  auto* n_tiles = reinterpret_cast<int32_t*>(p);
  auto* tiles = reinterpret_cast<int4*>(p + 16);
  auto* order = reinterpret_cast<int32_t*>(p + 16 + 16 * plan.max_tiles);
  grp.n_tiles = n_tiles;
  grp.tiles = tiles;
  grp.order = order;
  grp.max_tiles = plan.max_tiles;
  grp.k = static_cast<int>(ids.ne[0]);
  grp.n_act = b.ne[1];
  const size_t smem = 2 * sizeof(int) * static_cast<size_t>(as.ne[2]);
  moe_plan_kernel<<<1, kPlanThreads, smem, kc.stream>>>(td(ids), as.ne[2], M, n_tiles, tiles, order, out, kc.sink());
  kc.check_launch("moe_plan_kernel");
  mmq_grouped(kc, as, grp, qs, ds, out);
}

}  // namespace minfer::cuda
