// ATTENTION prefill on the tensor cores: FlashAttention-2 (Dao 2023) with mma.sync m16n8k16 over
// the paged KV cache, for f16 and q8_0 K/V with head dims 64 and 128. k_attention.cu sends it
// every such node with T > kDecodeMaxRows queries (launch_fa); semantics of ops/cpu/k_attention.cpp.
//
// A block holds kFaWarps x 16 queries of one head; warp w owns query rows [16w, 16w + 16).
// - Q lives in registers as mma A fragments for the whole kernel: loaded once, pre-scaled by
//   `scale` and rounded to f16 (as the WMMA kernel before it did).
// - K/V tiles of 64 keys are staged in shared memory with cp.async, double-buffered: tile i+1 is
//   in flight while tile i is computed. Rows are padded to D + 8 halves, so the 8 row addresses of
//   an ldmatrix fall in distinct banks. f16 rows are copied as they are (16-byte pieces); q8_0
//   rows (34-byte blocks, 4-byte aligned rows) are copied raw in 4-byte pieces and widened to f16
//   in shared memory by the whole block (exactly f16(q * d), as the f32 path rounds it).
// - S = Q K^T: K fragments with ldmatrix (B operand, "col": key rows are contiguous in d);
//   O += P V: V fragments with ldmatrix.trans. S stays in registers: the C fragment of S, rounded
//   to f16 in pairs, is the A fragment of P. Online softmax in f32 in base 2 (one FFMA + EX2 per
//   score), row max by quad shuffles, row sums kept per lane and reduced once at the end; O in f32
//   registers.
// - Paged cache: key j of a query's sequence lives in cell table[seq][j >> bs_log2] << bs_log2 |
//   (j & (bs - 1)). The 64 cells of a tile are looked up two tiles ahead (the table load is in
//   flight while a tile is computed) and kept in shared memory. A query tile holding queries of
//   several sequences is walked one run of one sequence's queries at a time (as the SIMT kernels
//   do); every run streams the keys 0..(its largest position) of its sequence.
// - Causal work skipping per warp: a warp computes nothing on tiles past its rows' largest
//   position, and masks scores (key > position, or a row of another run) only on tiles that need
//   it. Keys past the run's end are zero-filled in shared memory (never read from the cache).
// - GQA: one block per (query tile, query head). A staged 64-key tile (256 D bytes of K and V)
//   serves 256 D FLOP per query row, so a block's FLOP per byte read from L2 equals its row count
//   (128), whichever heads the rows belong to: packing a group's heads into one block would not
//   cut L2 or shared-memory traffic per FLOP for T > 64 (only for a handful of queries, which the
//   decode kernels take), and would mix rows of different heads under one mask. Instead the grid
//   puts the head fastest (blockIdx.x), so the 7 heads of a Qwen2.5-7B group, and all 28 heads of
//   one query tile, run side by side and read the same K/V tiles from L2 at about the same time. Query tiles
//   go in reverse order (blockIdx.y = 0 is the last tile): causally the last tiles have the most
//   keys, and they start first.
// Rounding: scores and softmax in f32; q and P (unnormalized, <= 1) rounded to f16; the row sum
// uses the f32 P. Invalid positions / sequences / block-table entries are reported through the
// ErrorSink exactly as the other attention kernels do (an invalid query's output is NaN).
// scripts/probes/fa_probe.cu times it (8 and 4 warps) against the WMMA kernel it replaced.
#include <algorithm>
#include <cstdint>
#include <string>

#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/cp_async.cuh"
#include "ops/cuda/mma.cuh"

namespace minfer::cuda {
namespace {

constexpr int kFaKeys = 64;  // keys per K/V tile
constexpr int kFaWarps = 8;  // the library's block: 8 warps x 16 query rows (the probe also times 4)
constexpr float kLog2e = 1.4426950408889634f;

// 2^x (MUFU.EX2; 2^-inf = 0).
__device__ __forceinline__ float fa_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The shared memory of one block (byte offsets; every part 16-byte aligned).
// An operand (K or V) of type f16 takes two f16 tiles (the stages); of type q8_0, two raw stages
// and one f16 tile that the raw stage of the current tile is widened into.
template <int D, DType KT, DType VT, int W>
struct FaShape {
  static constexpr int kRows = 16 * W, kThreads = 32 * W;
  static constexpr int kLd = D + 8;                  // halves per staged row
  static constexpr int kTile = kFaKeys * kLd * 2;    // bytes of one f16 tile
  static constexpr int kRawRow = D / 32 * 34;        // bytes of a q8_0 row (4-byte multiple)
  static constexpr int kRaw = kFaKeys * kRawRow;     // bytes of one raw q8_0 stage
  static constexpr int operand(DType t) { return t == DType::F16 ? 2 * kTile : kTile + 2 * kRaw; }
  static constexpr int kK = 0, kV = operand(KT), kCells = kV + operand(VT);
  static constexpr int kPos = kCells + 2 * kFaKeys * 8;  // cells: int64 [2][kFaKeys]
  static constexpr int kBytes = kPos + 2 * kRows * 4;     // qpos, qseq: int32 [kRows] each
  static_assert(kTile % 16 == 0 && kRaw % 16 == 0, "16-byte aligned parts");
};

// The f16 tile of operand T (at `op`) that tile `it` is computed from.
template <DType T, int D, int W>
__device__ __forceinline__ const __half* fa_tile(const unsigned char* op, int it) {
  using S = FaShape<D, DType::F16, DType::F16, W>;
  if constexpr (T == DType::F16) return reinterpret_cast<const __half*>(op + (it & 1) * S::kTile);
  else return reinterpret_cast<const __half*>(op);
}

// Issues the copies of one tile's rows of operand T into stage `stage` (cells[r] < 0: a key past
// the run, zero-filled). Every thread of the block takes part.
template <DType T, int D, int W>
__device__ __forceinline__ void fa_issue(unsigned char* op, const char* gbase, int64_t nb2, const int64_t* cells,
                                         int stage) {
  using S = FaShape<D, DType::F16, DType::F16, W>;
  if constexpr (T == DType::F16) {
    constexpr int C = D / 8;  // 16-byte pieces per row
    static_assert(kFaKeys * C % S::kThreads == 0 && S::kThreads % C == 0, "whole rounds");
    __half* dst = reinterpret_cast<__half*>(op + stage * S::kTile);
    const int c = threadIdx.x % C;  // kThreads % C == 0: the same piece of every row this thread copies
#pragma unroll
    for (int rd = 0; rd < kFaKeys * C / S::kThreads; ++rd) {
      const int r = threadIdx.x / C + rd * (S::kThreads / C);
      const int64_t cell = cells[r];
      __half* s = dst + r * S::kLd + 8 * c;
      if (cell >= 0) cp_async16(s, gbase + cell * nb2 + 16 * c);
      else *reinterpret_cast<uint4*>(s) = make_uint4(0, 0, 0, 0);
    }
  } else {
    constexpr int G = S::kRawRow / 4;  // 4-byte pieces per row
    unsigned char* dst = op + S::kTile + stage * S::kRaw;
#pragma unroll 4
    for (int i = threadIdx.x; i < kFaKeys * G; i += S::kThreads) {
      const int r = i / G, c = i % G;
      const int64_t cell = cells[r];
      unsigned char* s = dst + r * S::kRawRow + 4 * c;
      if (cell >= 0) cp_async4(s, gbase + cell * nb2 + 4 * c);
      else *reinterpret_cast<uint32_t*>(s) = 0;
    }
  }
}

// Widens the raw q8_0 stage of tile `it` into the operand's f16 tile (the whole block).
template <int D, int W>
__device__ __forceinline__ void fa_widen(unsigned char* op, int it) {
  using S = FaShape<D, DType::F16, DType::F16, W>;
  constexpr int C = D / 8;  // 8-element pieces per row
  static_assert(kFaKeys * C % S::kThreads == 0 && S::kThreads % C == 0, "whole rounds");
  const unsigned char* raw = op + S::kTile + (it & 1) * S::kRaw;
  __half* dst = reinterpret_cast<__half*>(op);
  const int c = threadIdx.x % C;
#pragma unroll
  for (int rd = 0; rd < kFaKeys * C / S::kThreads; ++rd) {
    const int r = threadIdx.x / C + rd * (S::kThreads / C);
    const unsigned char* blk = raw + r * S::kRawRow + (c >> 2) * 34;  // 2-byte aligned
    const __half2 d2 = __half2half2(*reinterpret_cast<const __half*>(blk));
    const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + (c & 3) * 8);
    const uint32_t w0 = qs[0] | (static_cast<uint32_t>(qs[1]) << 16), w1 = qs[2] | (static_cast<uint32_t>(qs[3]) << 16);
    uint4 out;
    q8_widen4(w0, d2, out.x, out.y);
    q8_widen4(w1, d2, out.z, out.w);
    *reinterpret_cast<uint4*>(dst + r * S::kLd + 8 * c) = out;
  }
}

// One warp's work on one K/V tile: S = Q K^T for its 16 rows and the tile's 64 keys, the online
// softmax update, O += P V. pos_a / pos_b: the positions of this lane's rows g and g + 8 (-1: a
// row outside the current run); mask: some score of the warp's rows in this tile is not visible.
template <int D, int W>
__device__ __forceinline__ void fa_compute(const __half* Ks, const __half* Vs, const uint32_t (&qf)[D / 16][4],
                                           float (&o)[D / 8][4], float& m_a, float& m_b, float& l_a, float& l_b,
                                           int j0, int pos_a, int pos_b, bool mask) {
  using S = FaShape<D, DType::F16, DType::F16, W>;
  const int lane = threadIdx.x & 31, qd = lane & 3;
  // ldmatrix row addresses: K, matrices (keys 0-7, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7),
  // (keys 8-15, d 8-15) = b0, b1 of key tiles 2np and 2np + 1; V (trans), matrices (keys 0-7, d 0-7),
  // (keys 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15) = b0, b1 of d tiles 2dp and 2dp + 1.
  const __half* kl = Ks + ((lane >> 4) * 8 + (lane & 7)) * S::kLd + ((lane >> 3) & 1) * 8;
  const __half* vl = Vs + (((lane >> 3) & 1) * 8 + (lane & 7)) * S::kLd + (lane >> 4) * 8;

  float s[kFaKeys / 8][4];
#pragma unroll
  for (int n = 0; n < kFaKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < kFaKeys / 16; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, kl + np * 16 * S::kLd + kk * 16);
      mma16816(s[2 * np], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b[0], b[1]);
      mma16816(s[2 * np + 1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b[2], b[3]);
    }
  }
  if (mask) {
#pragma unroll
    for (int n = 0; n < kFaKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (j0 + n * 8 + 2 * qd + (e & 1) > (e < 2 ? pos_a : pos_b)) s[n][e] = -INFINITY;
  }
  float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
  for (int n = 0; n < kFaKeys / 8; ++n) {
    mx_a = fmaxf(mx_a, fmaxf(s[n][0], s[n][1]));
    mx_b = fmaxf(mx_b, fmaxf(s[n][2], s[n][3]));
  }
  mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
  mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
  mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
  mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
  // A row that has seen no visible key yet keeps m = -inf; it is shifted by 0 instead (its P and
  // its correction are then exactly 0, and its O and l stay 0).
  const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
  const float mu_a = mn_a == -INFINITY ? 0.0f : mn_a, mu_b = mn_b == -INFINITY ? 0.0f : mn_b;
  const float corr_a = fa_exp2((m_a - mu_a) * kLog2e), corr_b = fa_exp2((m_b - mu_b) * kLog2e);
  m_a = mn_a;
  m_b = mn_b;
  const float ms_a = mu_a * kLog2e, ms_b = mu_b * kLog2e;
  // P = exp(S - m) in f32 for the row sums, as f16 A fragments for P V: key tiles 2kk, 2kk + 1
  // of the C fragments are a0/a1 and a2/a3 of the A fragment of keys [16kk, 16kk + 16).
  uint32_t pf[kFaKeys / 16][4];
  float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
  for (int n = 0; n < kFaKeys / 8; ++n) {
    const float p0 = fa_exp2(fmaf(s[n][0], kLog2e, -ms_a)), p1 = fa_exp2(fmaf(s[n][1], kLog2e, -ms_a));
    const float p2 = fa_exp2(fmaf(s[n][2], kLog2e, -ms_b)), p3 = fa_exp2(fmaf(s[n][3], kLog2e, -ms_b));
    sum_a += p0 + p1;
    sum_b += p2 + p3;
    pf[n / 2][(n & 1) * 2] = pack_half2(p0, p1);
    pf[n / 2][(n & 1) * 2 + 1] = pack_half2(p2, p3);
  }
  l_a = l_a * corr_a + sum_a;
  l_b = l_b * corr_b + sum_b;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    o[n][0] *= corr_a;
    o[n][1] *= corr_a;
    o[n][2] *= corr_b;
    o[n][3] *= corr_b;
  }
#pragma unroll
  for (int kk = 0; kk < kFaKeys / 16; ++kk) {
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, vl + kk * 16 * S::kLd + dp * 16);
      mma16816(o[2 * dp], pf[kk][0], pf[kk][1], pf[kk][2], pf[kk][3], b[0], b[1]);
      mma16816(o[2 * dp + 1], pf[kk][0], pf[kk][1], pf[kk][2], pf[kk][3], b[2], b[3]);
    }
  }
}

template <int D, DType KT, DType VT, int W>
__global__ void __launch_bounds__(32 * W, W <= 4 ? 2 : 1)
    attn_fa_kernel(TD q, TD k, TD v, Paged pk, float scale, int group, float* dst, ErrorSink sink) {
  using S = FaShape<D, KT, VT, W>;
  extern __shared__ __align__(128) unsigned char fa_smem[];
  unsigned char* kop = fa_smem + S::kK;
  unsigned char* vop = fa_smem + S::kV;
  int64_t* cells = reinterpret_cast<int64_t*>(fa_smem + S::kCells);  // [2][kFaKeys]: tiles of even / odd index
  int32_t* qpos = reinterpret_cast<int32_t*>(fa_smem + S::kPos);
  int32_t* qseq = qpos + S::kRows;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, qd = lane & 3;
  const int h = blockIdx.x, n_head = gridDim.x, hk = h / group;
  const int64_t T = q.ne[2];
  const int64_t t0 = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * S::kRows;  // the last tiles first

  if (tid < S::kRows) query_pos_seq(pk, t0 + tid, T, sink, h == 0, qpos[tid], qseq[tid]);

  // This lane's rows of the warp: ra (fragment row g) and rb (g + 8). Q as A fragments, f16.
  const int ra = warp * 16 + g, rb = ra + 8;
  const int64_t ta = t0 + ra, tb = t0 + rb;
  uint32_t qf[D / 16][4];
  {
    const char* qa = q.data + static_cast<int64_t>(h) * q.nb[1] + ta * q.nb[2];
    const char* qb = q.data + static_cast<int64_t>(h) * q.nb[1] + tb * q.nb[2];
    auto ld = [&](const char* base, bool in, int e) {
      return in ? *reinterpret_cast<const float*>(base + e * q.nb[0]) * scale : 0.0f;
    };
    const bool in_a = ta < T, in_b = tb < T;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int e = kk * 16 + 2 * qd;
      qf[kk][0] = pack_half2(ld(qa, in_a, e), ld(qa, in_a, e + 1));
      qf[kk][1] = pack_half2(ld(qb, in_b, e), ld(qb, in_b, e + 1));
      qf[kk][2] = pack_half2(ld(qa, in_a, e + 8), ld(qa, in_a, e + 9));
      qf[kk][3] = pack_half2(ld(qb, in_b, e + 8), ld(qb, in_b, e + 9));
    }
  }
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  const char* kbase = k.data + static_cast<int64_t>(hk) * k.nb[1];
  const char* vbase = v.data + static_cast<int64_t>(hk) * v.nb[1];
  const int64_t knb = k.nb[2], vnb = v.nb[2];
  __syncthreads();

  for (int r0 = 0; r0 < S::kRows;) {
    // The next run of queries of one sequence [r0, r1) and its largest visible key count.
    const int seq = qseq[r0];
    int r1 = r0 + 1, kv_max = qpos[r0] + 1;
    while (r1 < S::kRows && qseq[r1] == seq) kv_max = max(kv_max, qpos[r1++] + 1);
    if (seq < 0) kv_max = 0;
    const int32_t* row = pk.table + static_cast<int64_t>(max(seq, 0)) * pk.max_blocks;
    const int pos_a = ra >= r0 && ra < r1 ? qpos[ra] : -1;
    const int pos_b = rb >= r0 && rb < r1 ? qpos[rb] : -1;
    const int w_max = __reduce_max_sync(0xffffffffu, max(pos_a, pos_b));  // -1: no row of this warp in the run
    const int w_min = __reduce_min_sync(0xffffffffu, min(pos_a, pos_b));
    const int n_tiles = (kv_max + kFaKeys - 1) / kFaKeys;
    if (n_tiles > 0) {
      if (tid < kFaKeys) {
        cells[tid] = tid < kv_max ? paged_cell(pk, row, tid, sink) : -1;
        cells[kFaKeys + tid] = kFaKeys + tid < kv_max ? paged_cell(pk, row, kFaKeys + tid, sink) : -1;
      }
      __syncthreads();
      fa_issue<KT, D, W>(kop, kbase, knb, cells, 0);
      fa_issue<VT, D, W>(vop, vbase, vnb, cells, 0);
      cp_async_commit();
    }
    for (int it = 0; it < n_tiles; ++it) {
      const int j0 = it * kFaKeys;
      if (it + 1 < n_tiles) {
        const int64_t* cn = cells + ((it + 1) & 1) * kFaKeys;
        fa_issue<KT, D, W>(kop, kbase, knb, cn, (it + 1) & 1);
        fa_issue<VT, D, W>(vop, vbase, vnb, cn, (it + 1) & 1);
      }
      cp_async_commit();
      // The table entry of key jp of tile it + 2: loaded now, checked and stored after the compute.
      const int jp = j0 + 2 * kFaKeys + tid;
      const bool look = tid < kFaKeys && jp < kv_max;
      const int32_t bp = look ? table_entry(pk, row, jp) : 0;
      cp_async_wait<1>();  // tile it has landed (this thread's copies)
      __syncthreads();     // ... and everyone's
      if constexpr (KT == DType::Q8_0 || VT == DType::Q8_0) {
        if constexpr (KT == DType::Q8_0) fa_widen<D, W>(kop, it);
        if constexpr (VT == DType::Q8_0) fa_widen<D, W>(vop, it);
        __syncthreads();
      }
      if (w_max >= j0)  // warp-uniform: some row of this warp sees a key of this tile
        fa_compute<D, W>(fa_tile<KT, D, W>(kop, it), fa_tile<VT, D, W>(vop, it), qf, o, m_a, m_b, l_a, l_b, j0,
                         pos_a, pos_b, w_min < j0 + kFaKeys - 1);
      if (tid < kFaKeys && it + 2 < n_tiles) cells[(it & 1) * kFaKeys + tid] = look ? entry_cell(pk, bp, jp, sink) : -1;
      __syncthreads();  // the stage of tile it is refilled next, the cells of tile it + 2 are visible
    }
    r0 = r1;
  }

  l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
  l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
  const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;  // l = 0 (an invalid query, reported): NaN
  if (ta < T) {
    float* out = dst + (ta * n_head + h) * D + 2 * qd;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) *reinterpret_cast<float2*>(out + 8 * n) = make_float2(o[n][0] * inv_a, o[n][1] * inv_a);
  }
  if (tb < T) {
    float* out = dst + (tb * n_head + h) * D + 2 * qd;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) *reinterpret_cast<float2*>(out + 8 * n) = make_float2(o[n][2] * inv_b, o[n][3] * inv_b);
  }
}

// Shared memory opt-in once per instantiation (before any graph capture: the first node of a
// shape runs uncaptured), then the launch. Grid: (head, query tile), heads fastest.
template <int D, DType KT, DType VT, int W>
void fa_run(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk, float scale,
            int group, float* out) {
  using S = FaShape<D, KT, VT, W>;
  static const bool ok = [] {
    return cudaFuncSetAttribute(attn_fa_kernel<D, KT, VT, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                S::kBytes) == cudaSuccess;
  }();
  if (!ok) throw OpError(kc.where() + ": attn_fa_kernel cannot have " + std::to_string(S::kBytes) + " bytes of shared memory");
  const int64_t T = q.ne[2], n_head = q.ne[1];
  attn_fa_kernel<D, KT, VT, W><<<dim3(static_cast<unsigned>(n_head), static_cast<unsigned>(ceil_div(T, S::kRows))),
                                 S::kThreads, S::kBytes, kc.stream>>>(td(q), td(k), td(v), pk, scale, group, out,
                                                                      kc.sink());
  kc.check_launch("attn_fa_kernel");
}

template <int D, int W>
void fa_dispatch(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk, float scale,
                 int group, float* out) {
  const bool k16 = k.type == DType::F16, v16 = v.type == DType::F16;
  if (k16 && v16) return fa_run<D, DType::F16, DType::F16, W>(kc, q, k, v, pk, scale, group, out);
  if (k16) return fa_run<D, DType::F16, DType::Q8_0, W>(kc, q, k, v, pk, scale, group, out);
  if (v16) return fa_run<D, DType::Q8_0, DType::F16, W>(kc, q, k, v, pk, scale, group, out);
  return fa_run<D, DType::Q8_0, DType::Q8_0, W>(kc, q, k, v, pk, scale, group, out);
}

// Whether the kernel takes a K or V cache: f16 rows copied in 16-byte pieces, q8_0 rows in 4-byte
// pieces (the cache's own layouts; a view elsewhere goes to the SIMT kernels).
bool fa_operand_ok(const Tensor& t) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(t.data) | t.nb[1] | t.nb[2];
  if (t.type == DType::F16) return t.nb[0] == 2 && bits % 16 == 0;
  if (t.type == DType::Q8_0) return bits % 4 == 0;
  return false;
}

}  // namespace

bool launch_fa(KernelContext& kc, const Tensor& q, const Tensor& k, const Tensor& v, const Paged& pk, float scale,
               int group, float* out) {
  const int64_t d = q.ne[0];
  if (v.ne[0] != d || (d != 64 && d != 128) || !fa_operand_ok(k) || !fa_operand_ok(v)) return false;
  if (ceil_div(q.ne[2], 16 * kFaWarps) > 65535) return false;  // grid.y
  if (d == 64) fa_dispatch<64, kFaWarps>(kc, q, k, v, pk, scale, group, out);
  else fa_dispatch<128, kFaWarps>(kc, q, k, v, pk, scale, group, out);
  return true;
}

}  // namespace minfer::cuda
