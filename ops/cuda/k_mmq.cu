// MMQ for decode batches: block-quantized weights times 9..64 activation rows (any N works; mmvq()
// sends 1..8 rows to the dp4a MMVQ, faster there) on the int8 tensor
// cores (mma.sync m16n8k32 / m16n8k16, s8 x s8 -> s32), with the q8_1 activation planes MMVQ uses.
//
// Why: MMVQ (k_mmvq.cu) recomputes every weight unit's dot products once per activation row with
// dp4a, so a decode step of B sequences costs ~B times a single row's ALU and activation loads.
// Here one mma multiplies 16 weight rows by 8 activation rows over one 32-element unit: the
// weights are read and unpacked once per step whatever the batch, and B up to 64 costs little
// more than B = 1 (the decode step of many sequences is then bound by the weight bytes, as it
// should be). The structure is llama.cpp's MMQ (ggml-cuda/mmq.cuh) reduced to the decode shape;
// the code is our own, over the block layouts of tensor/quants_blocks.h.
//
// A block holds 64 weight rows, 16 per warp, and walks K in chunks of 8 units (32-element blocks);
// each chunk's weight rows, activation rows and activation scales are staged into shared memory
// with cp.async, double buffered, so the unit loop touches shared memory only (when the
// activations were read from global memory per warp, unit and 8-row tile, a decode step cost
// ~0.65 ms more per added row: bound by L1 wavefronts, not by bytes); weights with few
// rows also split K over several blocks (their partial sums are added in split order by a second
// kernel). For unit u a thread of lane (g = lane / 4, t = lane % 4) holds the int8
// words of weight rows g and g + 8 at unit elements [4t, 4t + 4) and [16 + 4t, 16 + 4t + 4) — the
// mma A fragment — and, per 8-row tile of activations, the words of activation row g at the same
// elements — the B fragment. The int32 results are the unit dots of (row, activation) pairs and
// are scaled in f32: acc += d_a * (d_w0 * dot_lo + d_w1 * dot_hi) + m_w * s_a, in unit order
// within a split, then the splits in order. Nothing depends on the number of activation
// rows N, so a row gets the same bits in every batch this kernel runs (batch invariance).
//
// MUL_MAT_ID's prefill (mmq_grouped) runs the same kernel over tiles of (token, slot) pairs that
// chose one expert: the tile's columns are gathered activation rows and its sums scattered to the
// pairs' output rows, so each expert's rows are read once per tile instead of once per pair.
//
// Q4_K and Q6_K weights of big shapes go to the f16 tensor-core kernel of k_mmq_f16.cu instead
// (mmq_use_f16 below says which and why); mmq_grouped always runs this kernel.
#include <algorithm>
#include <string>

#include "ops/cuda/cp_async.cuh"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/quant_device.cuh"

namespace minfer::cuda {
namespace {

// One thread's view of one weight unit: int8 words of elements [4t, 4t + 4) (lo) and
// [16 + 4t, 16 + 4t + 4) (hi), the scales of elements 0..15 (d0) and 16..31 (d1), and the
// minimum term m (times the activation block's sum; 0 when the format has none).
struct Frag {
  int lo, hi;
  float d0, d1, m;
};

template <DType T>
struct MmqTraits;  // HALF: separate scales for the two halves of a unit (two k16 mmas)
template <> struct MmqTraits<DType::Q4_0> { static constexpr bool HALF = false; };
template <> struct MmqTraits<DType::Q4_1> { static constexpr bool HALF = false; };
template <> struct MmqTraits<DType::Q5_0> { static constexpr bool HALF = false; };
template <> struct MmqTraits<DType::Q5_1> { static constexpr bool HALF = false; };
template <> struct MmqTraits<DType::Q8_0> { static constexpr bool HALF = false; };
template <> struct MmqTraits<DType::Q4_K> { static constexpr bool HALF = false; };
template <> struct MmqTraits<DType::Q5_K> { static constexpr bool HALF = false; };
template <> struct MmqTraits<DType::Q6_K> { static constexpr bool HALF = true; };

template <DType T>
__device__ __forceinline__ void frag(const uint8_t* row, int u, int t, Frag& f);

template <>
__device__ __forceinline__ void frag<DType::Q4_0>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 18;
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b));
  const int v = ld_i32_a2(b + 2 + 4 * t);  // element i: low nibble of qs[i], element 16 + i: high nibble
  f.lo = v & 0x0F0F0F0F;
  f.hi = (v >> 4) & 0x0F0F0F0F;
  f.d0 = f.d1 = d;
  f.m = -8.0f * d;
}

template <>
__device__ __forceinline__ void frag<DType::Q4_1>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 20;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b);
  const int v = ld_i32_a4(b + 4 + 4 * t);
  f.lo = v & 0x0F0F0F0F;
  f.hi = (v >> 4) & 0x0F0F0F0F;
  f.d0 = f.d1 = h2f(h[0]);
  f.m = h2f(h[1]);
}

template <>
__device__ __forceinline__ void frag<DType::Q5_0>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 22;
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b));
  const uint32_t qh = static_cast<uint32_t>(ld_i32_a2(b + 2));
  const int v = ld_i32_a2(b + 6 + 4 * t);
  f.lo = (v & 0x0F0F0F0F) | spread4_bit4(qh >> (4 * t));
  f.hi = ((v >> 4) & 0x0F0F0F0F) | spread4_bit4(qh >> (16 + 4 * t));
  f.d0 = f.d1 = d;
  f.m = -16.0f * d;
}

template <>
__device__ __forceinline__ void frag<DType::Q5_1>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 24;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b);
  const uint32_t qh = static_cast<uint32_t>(ld_i32_a4(b + 4));
  const int v = ld_i32_a4(b + 8 + 4 * t);
  f.lo = (v & 0x0F0F0F0F) | spread4_bit4(qh >> (4 * t));
  f.hi = ((v >> 4) & 0x0F0F0F0F) | spread4_bit4(qh >> (16 + 4 * t));
  f.d0 = f.d1 = h2f(h[0]);
  f.m = h2f(h[1]);
}

template <>
__device__ __forceinline__ void frag<DType::Q8_0>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 34;
  f.lo = ld_i32_a2(b + 2 + 4 * t);
  f.hi = ld_i32_a2(b + 18 + 4 * t);
  f.d0 = f.d1 = h2f(*reinterpret_cast<const uint16_t*>(b));
  f.m = 0.0f;
}

// The scales and minimums of all 8 sub-blocks of a Q4_K/Q5_K super-block at b (4-byte aligned),
// decoded once per super-block instead of once per unit (scale_min_k4's packing).
__device__ __forceinline__ void kquant_scales8(const uint8_t* b, float (&d_sc)[8], float (&m_neg)[8]) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b);
  const float d = h2f(h[0]), dmin = h2f(h[1]);
  const uint32_t w0 = static_cast<uint32_t>(ld_i32_a4(b + 4)), w1 = static_cast<uint32_t>(ld_i32_a4(b + 8)),
                 w2 = static_cast<uint32_t>(ld_i32_a4(b + 12));
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int sh = 8 * (j & 3);
    int sc, m;
    if (j < 4) {
      sc = static_cast<int>((w0 >> sh) & 63);
      m = static_cast<int>((w1 >> sh) & 63);
    } else {
      sc = static_cast<int>(((w2 >> sh) & 0xF) | (((w0 >> sh) >> 6 & 3) << 4));
      m = static_cast<int>(((w2 >> sh) >> 4 & 0xF) | (((w1 >> sh) >> 6 & 3) << 4));
    }
    d_sc[j] = d * static_cast<float>(sc);
    m_neg[j] = -(dmin * static_cast<float>(m));
  }
}

// The int8 words of a Q4_K/Q5_K unit without its scales (frag<T> with the scales decoded apart).
template <DType T>
__device__ __forceinline__ void frag_quants(const uint8_t* row, int u, int t, Frag& f);

template <>
__device__ __forceinline__ void frag_quants<DType::Q4_K>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + (u >> 3) * 144;
  const int j = u & 7, shift = 4 * (j & 1);
  const uint8_t* qs = b + 16 + 32 * (j >> 1);
  f.lo = (ld_i32_a4(qs + 4 * t) >> shift) & 0x0F0F0F0F;
  f.hi = (ld_i32_a4(qs + 16 + 4 * t) >> shift) & 0x0F0F0F0F;
}

template <>
__device__ __forceinline__ void frag_quants<DType::Q5_K>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + (u >> 3) * 176;
  const int j = u & 7, shift = 4 * (j & 1);
  const uint8_t* qs = b + 48 + 32 * (j >> 1);
  const uint8_t* qh = b + 16;
  f.lo = ((ld_i32_a4(qs + 4 * t) >> shift) & 0x0F0F0F0F) | (((ld_i32_a4(qh + 4 * t) >> j) & 0x01010101) << 4);
  f.hi = ((ld_i32_a4(qs + 16 + 4 * t) >> shift) & 0x0F0F0F0F) | (((ld_i32_a4(qh + 16 + 4 * t) >> j) & 0x01010101) << 4);
}

template <DType T>
constexpr bool kSuperBlockScales = T == DType::Q4_K || T == DType::Q5_K;

template <>
__device__ __forceinline__ void frag<DType::Q6_K>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + (u >> 3) * 210;
  const int j = u & 7, h = j >> 2, qd = j & 3;
  const uint8_t* ql = b + 64 * h + 32 * (qd & 1);
  const uint8_t* qh = b + 128 + 32 * h;
  const int ls = 4 * (qd >> 1), hs = 2 * qd;
  const int lo_l = (ld_i32_a2(ql + 4 * t) >> ls) & 0x0F0F0F0F, lo_h = (ld_i32_a2(qh + 4 * t) >> hs) & 0x03030303;
  const int hi_l = (ld_i32_a2(ql + 16 + 4 * t) >> ls) & 0x0F0F0F0F, hi_h = (ld_i32_a2(qh + 16 + 4 * t) >> hs) & 0x03030303;
  f.lo = __vsubss4(lo_l | (lo_h << 4), 0x20202020);
  f.hi = __vsubss4(hi_l | (hi_h << 4), 0x20202020);
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b + 208));
  f.d0 = d * static_cast<float>(sc[8 * h + 2 * qd]);
  f.d1 = d * static_cast<float>(sc[8 * h + 2 * qd + 1]);
  f.m = 0.0f;
}

__device__ __forceinline__ void mma_k32(int (&c)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
}

__device__ __forceinline__ void mma_k16(int (&c)[4], int a0, int a1, int b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0), "r"(0), "r"(0), "r"(0), "r"(0));
}

// Block bytes and 32-element units per block of each format.
template <DType T> struct Fmt;
template <> struct Fmt<DType::Q4_0> { static constexpr int BB = 18, UPB = 1; };
template <> struct Fmt<DType::Q4_1> { static constexpr int BB = 20, UPB = 1; };
template <> struct Fmt<DType::Q5_0> { static constexpr int BB = 22, UPB = 1; };
template <> struct Fmt<DType::Q5_1> { static constexpr int BB = 24, UPB = 1; };
template <> struct Fmt<DType::Q8_0> { static constexpr int BB = 34, UPB = 1; };
template <> struct Fmt<DType::Q4_K> { static constexpr int BB = 144, UPB = 8; };
template <> struct Fmt<DType::Q5_K> { static constexpr int BB = 176, UPB = 8; };
template <> struct Fmt<DType::Q6_K> { static constexpr int BB = 210, UPB = 8; };

constexpr int kWarps = 4;                 // warps per block, 16 weight rows each (the mma's M)
constexpr int kBlockRows = 16 * kWarps;
constexpr int kChunkUnits = 8;            // units staged per step: one K-quant super-block, 8 legacy blocks
constexpr int kActPitch = kChunkUnits * 32 + 16;  // a staged activation row: 68 words, so the B
                                                  // fragment's rows g fall on banks 4g + t

template <DType T>
struct Chunk {
  static constexpr int kBytes = Fmt<T>::BB * kChunkUnits / Fmt<T>::UPB;
  // A row's chunk is staged from the 16-byte boundary below it (weights are only 2-byte aligned),
  // so a row of the tile holds up to 15 leading bytes more. The pitch is an odd number of 16-byte
  // words, so the 8 rows g of a fragment load start in 8 different 4-bank groups (an even pitch put
  // Q6_K's rows, 256 bytes apart, on the same banks: 8-way conflicts).
  static constexpr int kPitch16 = (kBytes + 15 + 15) / 16;
  static constexpr int kPitch = (kPitch16 | 1) * 16;
};

// Shared memory of one block, two stages of: the weight tile (64 rows x one chunk), the chunk's
// activation rows (int8, 8 * NT rows) and their q8_1 (d, s) pairs, unit-major so that a thread's
// two columns are one 16-byte load.
template <DType T, int NT>
struct Smem {
  static constexpr int kCols = 8 * NT;
  static constexpr int kWeight = kBlockRows * Chunk<T>::kPitch;
  static constexpr int kAct = kCols * kActPitch;
  static constexpr int kScale = kChunkUnits * kCols * static_cast<int>(sizeof(float2));
  static constexpr int kStage = kWeight + kAct + kScale;
  static constexpr int kBytes = 2 * kStage;
};

// Rows [m0, m0 + 64) of the weight times N activation rows over the chunks [c0, c1) of K. Each
// chunk's weight rows, activation rows and activation scales are staged into shared memory with
// cp.async, double buffered, so the inner loop reads only shared memory: the activations are
// read from L2 once per block and chunk instead of once per warp, unit and 8-row tile. Each warp
// multiplies its 16 rows; a thread's A fragment is read from the staged bytes by frag<T>. The sums
// go to dst (+ residual) when the grid does not split K (gridDim.z == 1), else to part[z] for
// mmq_reduce_kernel.
//
// GROUPED (MUL_MAT_ID prefill): blockIdx.y is a tile of grp, the weight is its expert's slice,
// column n is the activation row of the tile's pair n and its sums go to that pair's output row;
// the arithmetic of a column is the same as above, so it still depends on nothing but its row.
template <DType T, int NT, bool GROUPED>
__global__ void __launch_bounds__(32 * kWarps) mmq_kernel(const uint8_t* w, int64_t w_nb1, int64_t w_nb2,
                                                           int64_t w_nb3, int64_t M, int U, const int8_t* qs,
                                                           const float2* ds, int64_t r2, int64_t r3, int64_t B2, int N,
                                                           float* dst, const float* residual, float* part,
                                                           MmqGroups grp) {
  using C = Chunk<T>;
  using S = Smem<T, NT>;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int64_t col_row[GROUPED ? S::kCols : 1], col_out[GROUPED ? S::kCols : 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const int64_t bz = blockIdx.y, i2 = bz % B2, i3 = bz / B2;
  const int n_chunks = (U + kChunkUnits - 1) / kChunkUnits;
  const int c0 = static_cast<int>(static_cast<int64_t>(n_chunks) * blockIdx.z / gridDim.z);
  const int c1 = static_cast<int>(static_cast<int64_t>(n_chunks) * (blockIdx.z + 1) / gridDim.z);
  const uint8_t* base = w + (i2 / r2) * w_nb2 + (i3 / r3) * w_nb3;
  if constexpr (GROUPED) {
    if (static_cast<int64_t>(blockIdx.y) >= *grp.n_tiles) return;  // the whole block: before any barrier
    const int4 tile = grp.tiles[blockIdx.y];
    base = w + static_cast<int64_t>(tile.x) * w_nb2;
    N = tile.z;
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
      const int64_t s = grp.order[tile.y + i], tok = s / grp.k;
      col_out[i] = s;
      col_row[i] = (s % grp.k) % grp.n_act + grp.n_act * tok;
    }
    __syncthreads();
  }
  // The activation row of column n, and the output row its sums go to.
  auto act_row = [&](int n) -> int64_t {
    if constexpr (GROUPED) return col_row[n]; else return bz * N + n;
  };
  auto out_row = [&](int n) -> int64_t {
    if constexpr (GROUPED) return col_out[n]; else return bz * N + n;
  };
  const int64_t K = static_cast<int64_t>(U) * 32;
  auto wtile = [&](int s) { return smem + s * S::kStage; };
  auto atile = [&](int s) { return smem + s * S::kStage + S::kWeight; };
  auto stile = [&](int s) { return reinterpret_cast<float2*>(smem + s * S::kStage + S::kWeight + S::kAct); };
  auto row_ptr = [&](int r) { return base + min(m0 + r, M - 1) * w_nb1; };
  // Stages chunk c into buffer s: every weight row's bytes from the 16-byte boundary at or below
  // them, the N activation rows' units of the chunk and their scales. Columns N..8 NT are left
  // unstaged: their sums are never stored.
  auto stage = [&](int c, int s) {
    const int units = min(kChunkUnits, U - c * kChunkUnits);
    const int bytes = Fmt<T>::BB * ((units + Fmt<T>::UPB - 1) / Fmt<T>::UPB);
    constexpr int kMax16 = (C::kBytes + 15 + 15) / 16;
    uint8_t* wt = wtile(s);
    for (int i = threadIdx.x; i < kBlockRows * kMax16; i += blockDim.x) {
      const int r = i / kMax16, k = i % kMax16;
      const uint8_t* p = row_ptr(r) + static_cast<int64_t>(c) * C::kBytes;
      const auto a16 = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{15});
      if (k * 16 < (p - a16) + bytes) cp_async16(wt + r * C::kPitch + k * 16, a16 + k * 16);
    }
    uint8_t* at = atile(s);
    const int8_t* q_chunk = qs + static_cast<int64_t>(c) * kChunkUnits * 32;
    for (int i = threadIdx.x; i < N * 2 * kChunkUnits; i += blockDim.x) {
      const int n = i / (2 * kChunkUnits), k = i % (2 * kChunkUnits);  // 16-byte pieces, two per unit
      if (k < 2 * units) cp_async16(at + n * kActPitch + k * 16, q_chunk + act_row(n) * K + k * 16);
    }
    float2* st = stile(s);
    const float2* d_chunk = ds + static_cast<int64_t>(c) * kChunkUnits;
    for (int i = threadIdx.x; i < N * kChunkUnits; i += blockDim.x) {
      const int n = i / kChunkUnits, u = i % kChunkUnits;
      if (u < units) cp_async8(st + u * S::kCols + n, d_chunk + act_row(n) * U + u);
    }
    cp_async_commit();
  };
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

  const int ra = warp * 16 + g, rb = ra + 8;
  // Unit ul of the staged chunk into the accumulators: the weight fragments of rows ra and rb
  // (scales from the super-block's decoded table for the K-quants), then one mma per 8 columns.
  auto unit = [&](const uint8_t* ta, const uint8_t* tb, const uint8_t* at, const float2* st, int ul,
                  const float (&sd_a)[8], const float (&sm_a)[8], const float (&sd_b)[8], const float (&sm_b)[8]) {
    Frag fa, fb;
    if constexpr (kSuperBlockScales<T>) {
      frag_quants<T>(ta, ul, t, fa);
      frag_quants<T>(tb, ul, t, fb);
      fa.d0 = fa.d1 = sd_a[ul];
      fa.m = sm_a[ul];
      fb.d0 = fb.d1 = sd_b[ul];
      fb.m = sm_b[ul];
    } else {
      frag<T>(ta, ul, t, fa);
      frag<T>(tb, ul, t, fb);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint8_t* ap = at + (nt * 8 + g) * kActPitch + ul * 32;
      const int b_lo = *reinterpret_cast<const int*>(ap + 4 * t);
      const int b_hi = *reinterpret_cast<const int*>(ap + 16 + 4 * t);
      const float4 sc = *reinterpret_cast<const float4*>(st + ul * S::kCols + nt * 8 + 2 * t);
      const float2 s0 = make_float2(sc.x, sc.y), s1 = make_float2(sc.z, sc.w);
      if constexpr (MmqTraits<T>::HALF) {
        int c_lo[4], c_hi[4];
        mma_k16(c_lo, fa.lo, fb.lo, b_lo);
        mma_k16(c_hi, fa.hi, fb.hi, b_hi);
        // c[0], c[1]: weight row g; c[2], c[3]: row g + 8; columns 2t, 2t + 1.
        acc[nt][0] += s0.x * (fa.d0 * static_cast<float>(c_lo[0]) + fa.d1 * static_cast<float>(c_hi[0]));
        acc[nt][1] += s1.x * (fa.d0 * static_cast<float>(c_lo[1]) + fa.d1 * static_cast<float>(c_hi[1]));
        acc[nt][2] += s0.x * (fb.d0 * static_cast<float>(c_lo[2]) + fb.d1 * static_cast<float>(c_hi[2]));
        acc[nt][3] += s1.x * (fb.d0 * static_cast<float>(c_lo[3]) + fb.d1 * static_cast<float>(c_hi[3]));
      } else {
        int cc[4];
        mma_k32(cc, fa.lo, fb.lo, fa.hi, fb.hi, b_lo, b_hi);
        acc[nt][0] += s0.x * fa.d0 * static_cast<float>(cc[0]) + fa.m * s0.y;
        acc[nt][1] += s1.x * fa.d0 * static_cast<float>(cc[1]) + fa.m * s1.y;
        acc[nt][2] += s0.x * fb.d0 * static_cast<float>(cc[2]) + fb.m * s0.y;
        acc[nt][3] += s1.x * fb.d0 * static_cast<float>(cc[3]) + fb.m * s1.y;
      }
    }
  };

  if (c0 < c1) stage(c0, 0);
  for (int c = c0; c < c1; ++c) {
    const int s = (c - c0) & 1;
    if (c + 1 < c1) {
      stage(c + 1, s ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint8_t* pa = row_ptr(ra) + static_cast<int64_t>(c) * C::kBytes;
    const uint8_t* pb = row_ptr(rb) + static_cast<int64_t>(c) * C::kBytes;
    const uint8_t* ta = wtile(s) + ra * C::kPitch + (reinterpret_cast<uintptr_t>(pa) & 15);
    const uint8_t* tb = wtile(s) + rb * C::kPitch + (reinterpret_cast<uintptr_t>(pb) & 15);
    const uint8_t* at = atile(s);
    const float2* st = stile(s);
    const int units = min(kChunkUnits, U - c * kChunkUnits);
    float sd_a[8], sm_a[8], sd_b[8], sm_b[8];  // K-quants: the chunk is one super-block
    if constexpr (kSuperBlockScales<T>) {
      kquant_scales8(ta, sd_a, sm_a);
      kquant_scales8(tb, sd_b, sm_b);
    }
    if (kSuperBlockScales<T> || units == kChunkUnits) {  // K-quant chunks are whole super-blocks
#pragma unroll
      for (int ul = 0; ul < kChunkUnits; ++ul) unit(ta, tb, at, st, ul, sd_a, sm_a, sd_b, sm_b);
    } else if constexpr (!kSuperBlockScales<T>) {  // a legacy format's last chunk when K % 256 != 0
      for (int ul = 0; ul < units; ++ul) unit(ta, tb, at, st, ul, sd_a, sm_a, sd_b, sm_b);
    }
    __syncthreads();  // the buffer is staged again two chunks on
  }
  const bool split = gridDim.z > 1;
  float* out = split ? part + static_cast<int64_t>(blockIdx.z) * gridDim.y * N * M : dst;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t m = m0 + warp * 16 + g + (i >= 2 ? 8 : 0);
      const int n = nt * 8 + 2 * t + (i & 1);
      if (m >= M || n >= N) continue;
      const int64_t o = out_row(n) * M + m;
      out[o] = !split && residual ? residual[o] + acc[nt][i] : acc[nt][i];
    }
}

// The K splits' partial sums added in split order (+ residual).
__global__ void mmq_reduce_kernel(const float* part, int n_split, int64_t n, float* dst, const float* residual) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = part[i];
  for (int z = 1; z < n_split; ++z) v += part[z * n + i];
  dst[i] = residual ? residual[i] + v : v;
}

// K splits: enough blocks for three per SM when the weight has few rows (attention projections,
// ffn_down), each split keeping at least two chunks to pipeline. A function of the weight shape and
// the device only, never of N (batch invariance).
int k_splits(const KernelContext& kc, int64_t M, int U) {
  const int64_t blocks = ceil_div(M, kBlockRows);
  const int64_t chunks = ceil_div(U, kChunkUnits);
  const int64_t want = ceil_div(3 * static_cast<int64_t>(kc.prop->multiProcessorCount), blocks);
  return static_cast<int>(std::clamp<int64_t>(want, 1, std::max<int64_t>(1, std::min<int64_t>(chunks / 2, 16))));
}

// Past 48 KiB a kernel must ask for its dynamic shared memory, once per instantiation.
template <DType T, int NT, bool GROUPED>
void opt_in(const KernelContext& kc) {
  constexpr int kSmem = Smem<T, NT>::kBytes;
  static const bool ok = [] {
    return cudaFuncSetAttribute(mmq_kernel<T, NT, GROUPED>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) ==
           cudaSuccess;
  }();
  if (!ok) throw OpError(kc.where() + ": mmq_kernel cannot have " + std::to_string(kSmem) + " bytes of shared memory");
}

template <DType T, int NT>
int launch_nt(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2,
              int64_t B3, float* dst, const float* residual, float* part, bool reduce) {
  const int64_t M = a.ne[1];
  const int U = static_cast<int>(a.ne[0] / 32);
  const int ks = k_splits(kc, M, U);
  if (ks > 1 && !part) throw std::logic_error(kc.where() + ": mmq needs scratch for its K splits");
  const dim3 grid(static_cast<unsigned>(ceil_div(M, kBlockRows)), static_cast<unsigned>(B2 * B3), static_cast<unsigned>(ks));
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
  const auto* w = static_cast<const uint8_t*>(a.data);
  const auto nb1 = static_cast<int64_t>(a.nb[1]), nb2 = static_cast<int64_t>(a.nb[2]), nb3 = static_cast<int64_t>(a.nb[3]);
  opt_in<T, NT, false>(kc);
  mmq_kernel<T, NT, false><<<grid, 32 * kWarps, Smem<T, NT>::kBytes, kc.stream>>>(
      w, nb1, nb2, nb3, M, U, qs, ds, r2, r3, B2, static_cast<int>(N), dst, residual, part, MmqGroups{});
  kc.check_launch("mmq_kernel");
  if (ks == 1 || !reduce) return ks;
  mmq_reduce(kc, part, ks, B2 * B3 * N * M, dst, residual);
  return 1;
}

template <DType T>
int launch_t(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
             float* dst, const float* residual, float* part, bool reduce) {
  switch ((N + 7) / 8) {
    case 1: return launch_nt<T, 1>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    case 2: return launch_nt<T, 2>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    case 3: return launch_nt<T, 3>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    case 4: return launch_nt<T, 4>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    case 5: return launch_nt<T, 5>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    case 6: return launch_nt<T, 6>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    case 7: return launch_nt<T, 7>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    case 8: return launch_nt<T, 8>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    default: throw std::logic_error(kc.where() + ": mmq with N > kDecodeMaxRows");
  }
}

// One block per 64 weight rows and tile: the tile grid is the plan's upper bound, the unused
// tiles' blocks leave at once (the real count is known on the device only).
template <DType T>
void launch_grouped_t(KernelContext& kc, const Tensor& as, const MmqGroups& grp, const int8_t* qs, const float2* ds,
                      float* dst) {
  constexpr int NT = kGroupTile / 8;
  const int64_t M = as.ne[1];
  const int U = static_cast<int>(as.ne[0] / 32);
  const dim3 grid(static_cast<unsigned>(ceil_div(M, kBlockRows)), static_cast<unsigned>(grp.max_tiles), 1);
  opt_in<T, NT, true>(kc);
  mmq_kernel<T, NT, true><<<grid, 32 * kWarps, Smem<T, NT>::kBytes, kc.stream>>>(
      static_cast<const uint8_t*>(as.data), static_cast<int64_t>(as.nb[1]), static_cast<int64_t>(as.nb[2]), 0, M, U,
      qs, ds, 1, 1, 1, 0, dst, nullptr, nullptr, grp);
  kc.check_launch("mmq_kernel (grouped)");
}

// Whether mmq() runs a weight on the f16 kernel (k_mmq_f16.cu) rather than mmq_kernel: Q4_K /
// Q6_K with K >= 8192 or M >= 16384. Measured on the H200 with scripts/probes/mmq_probe.cu
// (Qwen2.5-7B decode shapes, us per launch, int8 -> f16): at 16 rows gate|up 3584x37888 Q4_K
// 60.96 -> 39.64, down 18944x3584 Q4_K 35.49 -> 30.25 and Q6_K 52.02 -> 44.96, LM head
// 3584x152064 Q6_K 288.4 -> 220.1, but the small qkv 3584x4608 12.63 -> 14.87 and wo 3584x3584
// 9.71 -> 13.85 lose (launch- and latency-bound: the f16 kernel's activation conversion and
// offset mma per block are not amortized; docs/perf/2026-12-03-mmq-f16-probe.md). At 32 rows f16
// still wins on gate|up (87.95 -> 75.95), the LM head (405 -> 346) and Q4_K down (52.6 -> 49.6)
// but loses on Q6_K down (69.9 -> 74.7); at 64 rows it is 0-15 % slower on most shapes. The rule
// must not depend on N: a row's bits would then change with the batch it is in (the two kernels
// round differently), so it is one choice per weight, made for the rows where decode spends its
// time (9..32 sequences). The alignment mmq_f16_supported() asks for is a property of the
// weight too, so the fallback keeps batch invariance.
bool mmq_use_f16_shape(const Tensor& a) {
  return (a.type == DType::Q4_K || a.type == DType::Q6_K) && (a.ne[0] >= 8192 || a.ne[1] >= 16384);
}
bool mmq_use_f16(const Tensor& a) { return mmq_use_f16_shape(a) && mmq_f16_supported(a); }

}  // namespace

void mmq_reduce(KernelContext& kc, const float* part, int n_split, int64_t n, float* dst, const float* residual) {
  mmq_reduce_kernel<<<static_cast<unsigned>(ceil_div(n, 256)), 256, 0, kc.stream>>>(part, n_split, n, dst, residual);
  kc.check_launch("mmq_reduce_kernel");
}

void mmq_grouped(KernelContext& kc, const Tensor& as, const MmqGroups& grp, const int8_t* qs, const float2* ds,
                 float* dst) {
  if (grp.max_tiles == 0 || as.ne[1] == 0) return;
  switch (as.type) {
#define MINFER_T(T) \
  case DType::T: return launch_grouped_t<DType::T>(kc, as, grp, qs, ds, dst);
    MINFER_T(Q4_0) MINFER_T(Q4_1) MINFER_T(Q5_0) MINFER_T(Q5_1) MINFER_T(Q8_0)
    MINFER_T(Q4_K) MINFER_T(Q5_K) MINFER_T(Q6_K)
#undef MINFER_T
    default: throw OpError(kc.where() + ": no MMQ kernel for " + std::string(dtype_name(as.type)));
  }
}

bool mmq_supported(DType type) {
  switch (type) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default: return false;
  }
}

// The planner may size the scratch before the weight has its address (the f16 kernel's
// alignment test), so a weight of an f16 shape gets enough for either kernel.
size_t mmq_scratch(const KernelContext& kc, const Tensor& a, int64_t N, int64_t batches) {
  if (!mmq_supported(a.type)) return 0;
  const int ks = k_splits(kc, a.ne[1], static_cast<int>(a.ne[0] / 32));
  const size_t int8 = ks > 1 ? static_cast<size_t>(ks) * static_cast<size_t>(batches * N * a.ne[1]) * 4 : 0;
  return mmq_use_f16_shape(a) ? std::max(int8, mmq_f16_scratch(kc, a, N, batches)) : int8;
}

bool mmq_f16_every_row(const Tensor& a) {
  const bool gate_up = a.type == DType::Q4_K && a.ne[1] >= 16384;
  return (gate_up || a.type == DType::Q6_K) && mmq_use_f16(a);
}

bool mmq_runs_f16(const Tensor& a, int64_t N) {
  return N >= 1 && N <= kDecodeMaxRows && mmvq_runs_mmq(a, N) && mmq_use_f16(a);
}

int mmq(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
        float* dst, const float* residual, float* part, bool reduce) {
  if (mmq_use_f16(a)) return mmq_f16(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
  switch (a.type) {
#define MINFER_T(T) \
  case DType::T: return launch_t<DType::T>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
    MINFER_T(Q4_0) MINFER_T(Q4_1) MINFER_T(Q5_0) MINFER_T(Q5_1) MINFER_T(Q8_0)
    MINFER_T(Q4_K) MINFER_T(Q5_K) MINFER_T(Q6_K)
#undef MINFER_T
    default: throw OpError(kc.where() + ": no MMQ kernel for " + std::string(dtype_name(a.type)));
  }
}

}  // namespace minfer::cuda
