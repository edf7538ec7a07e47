// MMQ with f16 tensor cores for Q4_K and Q6_K weights with big shapes (mmq() in k_mmq.cu sends
// them here; the rule and its measurements are there): 9..64 activation rows from the q8_1
// planes, the weights dequantized exactly to f16 in registers, mma.sync m16n8k16 f16 x f16 -> f32
// with one f32 accumulator per (row, column) over all of K. Promoted from the probe
// scripts/probes/mmq_probe.cu (its `f16` configuration: 4 warps x 16 rows, 2 weight stages).
//
// Why it issues fewer instructions than the int8 mmq_kernel:
// - mmq_kernel rescales each (row, column) accumulator per 32-element unit in f32 (I2F, FMUL, 2
//   FFMA), i.e. ~20 instructions per 8-column tile per unit; here a tile costs 2 mma + 1 shared
//   load per unit, and the per-row cost is the dequantization: per 2 weights one LOP3 (nibbles
//   into an f16 magic number) and one HFMA2.
// - Exact dequantization with one HFMA2 per 2 weights: x = magic | q is exactly 1024 + q
//   (0x6400) and fma(x, s, -1024 s) = round(s q) exactly, since -1024 s is exact (a power of two
//   times an f16) and the fma rounds once. For the high nibbles of Q4_K, left in bits 4..7, the
//   magic 0x5000 gives exactly 32 + q/2 and fma(x, 2s, -64 s) = round(s q). (Never fold a rounded
//   constant such as 1024 s + min into the fma: it cancels catastrophically. Never use s/16: it can
//   be subnormal for small scales.) The sub-block scale s = f16(d * sc) (d an f16, sc a 6-bit or
//   int8 integer) is rounded once.
// - The remaining affine terms go through one extra mma per tile per super-block: Q4_K's
//   -dmin*m_j times the unit's activation sum (ds.y, given by the q8_1 planes), Q6_K's -32 s_j
//   times the 16-element activation sums. Those sums are split hi + lo into two f16 so the term
//   keeps ~22 bits (A is scaled by 2^kKS, B by 2^-kKS to keep both in range).
// - k permutation: the mma sums over k, so k may be permuted as long as A and B agree. A thread
//   owns contiguous weight bytes: for Q4_K quad lane t owns the 32 quant bytes of sub-block pair t
//   (two 16-byte shared loads per row per super-block, one scale pair to decode), for Q6_K the
//   bytes l in [8t, 8t+8) of each ql/qh group (one sub-block scale per unit). The activations are
//   written to shared memory in the same order, so each B fragment pair is one 16-byte load.
// - Activations: q8_1 (int8, d) converted once per block per chunk to f16 q * f16(d) while staging
//   (shared by all warps): int8 -> f16 exactly with the 0x6400 magic, one HMUL2; blocks whose
//   d > 511 take an f32 path that saturates to +-65504.
// - So a weight reaches the mma with at most two f16 roundings (its scale, its product), an
//   activation with two (f16(d), q * f16(d)); sums are f32. Against a float64 reference over the
//   q8_1-dequantized activations the probe measured a max |error| <= 9e-4 of max |ref| on the
//   Qwen2.5-7B shapes at 9..64 rows.
//
// Batch invariance (as mmq_kernel): a column's arithmetic — its f16 activations, the order of the
// mmas over K, the K split (a function of the weight shape and the device: mmf16_k_splits), the
// split order of mmq_reduce() — depends on its own activation row only, not on N or on the tile
// width NT the launch picks from N (an mma's output element depends on its A row and B column only).
//
// Layout and alignment: Q4_K rows must start 16-byte aligned (a super-block is 9 whole cp.async
// pieces); Q6_K rows (210-byte super-blocks) need 2-byte alignment only, each chunk being staged
// from the 16-byte boundary below it. mmq_f16_supported() checks both; mmq() falls back to the
// int8 kernel when they fail. K splits write partial sums to `part` and are added by k_mmq.cu's
// mmq_reduce() (split order, + residual), exactly as the int8 path does (the probe's in-kernel
// fixup needed zeroed counters the scratch allocator does not provide).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <cuda_fp16.h>

#include "ops/cuda/cp_async.cuh"
#include "ops/cuda/device.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/kernels.cuh"

namespace minfer::cuda {
namespace {

constexpr int kWarps = 4;   // 16 weight rows each: 64 rows per block
constexpr int kStages = 2;  // weight chunks in flight (4 was slower on the H200: fewer blocks per SM)

enum : int { kQ4K = 0, kQ6K = 1 };
constexpr int kUnits = 8;  // 32-element units per chunk: one super-block
constexpr int kKS = 4;     // offset mma: A scaled by 2^kKS, B by 2^-kKS

// f16x2 constants (bit patterns).
constexpr uint32_t kMagic1024 = 0x64006400u;  // 1024 + q for q in bits 0..9
constexpr uint32_t kMagic32 = 0x50005000u;    // 32 + q/2 for 16q in bits 4..9 (a nibble at bits 4..7)
constexpr uint32_t kOne_Two = 0x40003C00u;    // (1, 2)
constexpr uint32_t kM1024_M64 = 0xD400E400u;  // (-1024, -64)
constexpr uint32_t kM1024x2 = 0xE400E400u;    // (-1024, -1024)
constexpr uint32_t kM1152x2 = 0xE480E480u;    // (-1152, -1152): removes the 1024 magic and the int8 bias 128
constexpr uint32_t kM16x2 = 0xCC00CC00u;      // -2^kKS
constexpr uint32_t kM512x2 = 0xE000E000u;     // -32 * 2^kKS

template <int F>
struct Fmt;
// Q4_K rows are whole 16-byte words (144 = 9 * 16) and must start 16-byte aligned (the host
// checks): a row's super-block is 9 cp.async pieces and lands at offset 0 of its smem row. The
// pitch 144 (= 16 mod 128) puts the two rows of a quarter-warp's 16-byte loads on disjoint banks.
template <> struct Fmt<kQ4K> { static constexpr int BB = 144, PITCH = 144, PIECES = 9, BM_HALVES = 16; };
// Q6_K super-blocks are only 2-byte aligned: staged from the 16-byte boundary below (<= 14 bytes
// early), 14 pieces cover any of them.
template <> struct Fmt<kQ6K> { static constexpr int BB = 210, PITCH = 224, PIECES = 14, BM_HALVES = 32; };

template <int F, int NT>
struct Cfg {
  static constexpr int WARPS = kWarps, S = kStages;
  static constexpr int THREADS = 32 * WARPS, ROWS = 16 * WARPS, NC = 8 * NT;
  static constexpr int W_STAGE = ROWS * Fmt<F>::PITCH;
  static constexpr int W_BYTES = S * W_STAGE + 16;  // +16: Q6_K's widened loads may read 2 bytes past the last row
  static constexpr int A_BUF = kUnits * 32 * NC * 2;           // one chunk of f16 activations
  static constexpr int BM_BUF = NC * Fmt<F>::BM_HALVES * 2;    // one chunk of offset-term sums (hi, lo)
  static constexpr int SMEM = W_BYTES + 2 * (A_BUF + BM_BUF);
  static constexpr int TASKS = (kUnits * NC + THREADS - 1) / THREADS;  // (column, unit) conversions per thread
  static constexpr int RPT = ROWS * 8 / THREADS;                        // weight rows each thread stages
  static_assert(RPT * THREADS == ROWS * 8, "8 staging threads per weight row");
};

__device__ __forceinline__ __half2 h2(uint32_t u) {
  __half2 h;
  memcpy(&h, &u, 4);
  return h;
}
__device__ __forceinline__ uint32_t u32(__half2 h) {
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) { return u32(__hmul2(h2(a), h2(b))); }
__device__ __forceinline__ uint32_t hadd2(uint32_t a, uint32_t b) { return u32(__hadd2(h2(a), h2(b))); }
// fma(x, lo(s), lo(c)) / fma(x, hi(s), hi(c)): the broadcasts become HFMA2 operand selects.
__device__ __forceinline__ uint32_t hfma2_lo(uint32_t x, uint32_t s, uint32_t c) {
  return u32(__hfma2(h2(x), __low2half2(h2(s)), __low2half2(h2(c))));
}
__device__ __forceinline__ uint32_t hfma2_hi(uint32_t x, uint32_t s, uint32_t c) {
  return u32(__hfma2(h2(x), __high2half2(h2(s)), __high2half2(h2(c))));
}

__device__ __forceinline__ uint4 lds128(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// f16 of v saturated to +-65504 (NaN stays NaN).
__device__ __forceinline__ __half sat_half(float v) {
  return __float2half_rn(fabsf(v) > 65504.0f ? copysignf(65504.0f, v) : v);
}

// Byte offset in a chunk's activation buffer of the 4 f16 of unit u, elements 4 wi + {0, 2, 1, 3}
// (wi = 0..7), as the B fragments of the format's mma order expect them. A thread's (b0, b1) of two
// consecutive mmas are one 16-byte word: [mma pair ip][column n][quad lane t][2 x 4 halves].
template <int F>
__device__ __forceinline__ int b_offset(int NC, int n, int u, int wi) {
  if constexpr (F == kQ4K) {
    // mma (2 wi + hi) of lane t: unit 2t (low nibbles) or 2t + 1 (high nibbles), elements 4 wi + e
    return ((wi * NC + n) * 4 + (u >> 1)) * 16 + 8 * (u & 1);
  } else {
    // mma ((2h + w) * 4 + qd) of lane t: unit 4h + qd, elements 8t + 4w + e
    const int h = u >> 2, qd = u & 3, t = wi >> 1, w = wi & 1;
    return ((((2 * h + w) * 2 + (qd >> 1)) * NC + n) * 4 + t) * 16 + 8 * (qd & 1);
  }
}

// Q6_K offset mma: k slot kappa of the 16 sub-blocks j. A quad lane t holds the scales of
// sub-blocks 8h + 2qd + (t >> 1), so its slots (2t, 2t + 1, 2t + 8, 2t + 9) are given the
// sub-blocks j(kappa) = [0 2 4 6 1 3 5 7 | 8 10 12 14 9 11 13 15]; this is the inverse.
__device__ __forceinline__ int q6k_kappa(int j) { return (j & 8) | ((j & 1) << 2) | ((j & 7) >> 1); }

// Rows [m0, m0 + 64) of the weight times N <= 8 NT activation rows of batch blockIdx.y over the
// chunks of K split blockIdx.z; see the header comment for the scheme. The sums go to dst (+
// residual) when the grid does not split K (gridDim.z == 1), else to part[z] for mmq_reduce(), in
// the int8 mmq_kernel's layout: [split][batch][n][m].
// GLU (one batch, K not split; M = 2 n_ff, n_ff % 32 == 0): the weight is gate|up and the block
// takes gate rows [32 x, 32 x + 32) (warps 0, 1) and the up rows n_ff below them (warps 2, 3), so
// it holds whole 32-row units of h = silu(gate) * up and writes them as the q8_1 planes of the
// down projection (glu_qs [N][n_ff], glu_ds [N][n_ff / 32]) — each output element is the one the
// plain launch computes, and h and its quantization are swiglu_q8_1's, so the bits are those of
// the plain launch followed by swiglu_q8_1.
template <int F, int NT, bool GLU>
__global__ void __launch_bounds__(32 * kWarps) mmf16_kernel(const uint8_t* __restrict__ w_all, int64_t nb1, int64_t nb2,
                                                            int64_t nb3, int M, int U, const int8_t* __restrict__ qs_all,
                                                            const float2* __restrict__ ds_all, int64_t r2, int64_t r3,
                                                            int64_t B2, int N, float* dst_all, const float* residual,
                                                            float* part, int8_t* glu_qs, float2* glu_ds) {
  using C = Cfg<F, NT>;
  using FI = Fmt<F>;
  constexpr int NC = C::NC, ROWS = C::ROWS, THREADS = C::THREADS, S = C::S;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* const wbuf = smem;                      // S stages of ROWS x PITCH weight bytes
  uint8_t* const abuf = smem + C::W_BYTES;         // 2 buffers of f16 activations
  uint8_t* const mbuf = abuf + 2 * C::A_BUF;       // 2 buffers of offset-term sums

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int m0 = blockIdx.x * ROWS;
  const int n_chunks = U / kUnits;
  const int c0 = static_cast<int>(static_cast<int64_t>(n_chunks) * blockIdx.z / gridDim.z);
  const int c1 = static_cast<int>(static_cast<int64_t>(n_chunks) * (blockIdx.z + 1) / gridDim.z);
  const int64_t K = static_cast<int64_t>(U) * 32;
  // Batch bz = (i2, i3): the weight slice it broadcasts from (r2, r3 activation batches per
  // weight batch, as mmq_kernel) and its N activation and output rows.
  const int64_t bz = blockIdx.y, i2 = bz % B2, i3 = bz / B2;
  const uint8_t* const w = w_all + (i2 / r2) * nb2 + (i3 / r3) * nb3;
  const int8_t* const qs = qs_all + bz * N * K;
  const float2* const ds = ds_all + bz * N * U;
  auto row_ptr = [&](int r) {
    if constexpr (GLU) return w + (static_cast<int64_t>(r < 32 ? 0 : M / 2) + blockIdx.x * 32 + (r & 31)) * nb1;
    else return w + static_cast<int64_t>(min(m0 + r, M - 1)) * nb1;
  };

  // ---- weight staging: 8 threads per row (each warp instruction reads 128 contiguous bytes of 4
  // rows), pieces q and q + 8 of RPT rows per thread. Source pointers are kept (+16 q) and
  // advanced by the chunk offset; a Q6_K chunk is read from the 16-byte boundary below it.
  const int q = tid & 7;
  const uint8_t* wsrc[C::RPT];
  int wdst[C::RPT];
#pragma unroll
  for (int i = 0; i < C::RPT; ++i) {
    const int r = (tid >> 3) + (THREADS / 8) * i;
    wsrc[i] = row_ptr(r) + 16 * q;
    wdst[i] = r * FI::PITCH + 16 * q;
  }
  auto stage_w = [&](int c, int s) {
    const int64_t off = static_cast<int64_t>(c) * FI::BB;
    uint8_t* st = wbuf + s * C::W_STAGE;
#pragma unroll
    for (int i = 0; i < C::RPT; ++i) {
      const uint8_t* a = wsrc[i] + off;
      if constexpr (F == kQ6K) a = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(a) & ~uintptr_t{15});
      cp_async16(st + wdst[i], a);
      if (q + 8 < FI::PIECES) cp_async16(st + wdst[i] + 128, a + 128);
    }
  };

  // ---- activation staging: task (n, u) = one 32-element unit of column n, loaded into registers
  // one chunk ahead and converted to f16 into the block's buffer.
  uint4 pa[C::TASKS], pb[C::TASKS];
  float2 pd[C::TASKS];
  auto task_ok = [&](int j) {
    const int tau = tid + THREADS * j;
    return tau < kUnits * NC && (tau >> 3) < N;
  };
  auto load_act = [&](int c) {
#pragma unroll
    for (int j = 0; j < C::TASKS; ++j) {
      if (!task_ok(j)) continue;
      const int tau = tid + THREADS * j, n = tau >> 3, u = tau & 7;
      const int8_t* src = qs + static_cast<int64_t>(n) * K + (static_cast<int64_t>(c) * kUnits + u) * 32;
      pa[j] = __ldg(reinterpret_cast<const uint4*>(src));
      pb[j] = __ldg(reinterpret_cast<const uint4*>(src + 16));
      pd[j] = __ldg(ds + n * static_cast<int64_t>(U) + c * kUnits + u);
    }
  };
  auto store_act = [&](int b) {
    uint8_t* ab = abuf + b * C::A_BUF;
    __half* mb = reinterpret_cast<__half*>(mbuf + b * C::BM_BUF);
#pragma unroll
    for (int j = 0; j < C::TASKS; ++j) {
      if (!task_ok(j)) continue;
      const int tau = tid + THREADS * j, n = tau >> 3, u = tau & 7;
      const uint32_t wd[8] = {pa[j].x, pa[j].y, pa[j].z, pa[j].w, pb[j].x, pb[j].y, pb[j].z, pb[j].w};
      const float d = pd[j].x;
      float dq;  // the scale the f16 activations carry (for Q6_K's 16-element sums)
      if (d <= 511.0f) {  // |q| <= 128: q * f16(d) stays finite
        const __half dh = __float2half_rn(d);
        dq = __half2float(dh);
        const uint32_t d2 = u32(__half2half2(dh));
#pragma unroll
        for (int wi = 0; wi < 8; ++wi) {
          const uint32_t x = wd[wi] ^ 0x80808080u;  // int8 + 128 as a byte: 1024 + 128 + q under the magic
          const uint32_t e02 = hmul2(hadd2(__byte_perm(x, 0x64646464u, 0x4240), kM1152x2), d2);
          const uint32_t e13 = hmul2(hadd2(__byte_perm(x, 0x64646464u, 0x4341), kM1152x2), d2);
          *reinterpret_cast<uint2*>(ab + b_offset<F>(NC, n, u, wi)) = make_uint2(e02, e13);
        }
      } else {  // huge or non-finite scale: f32 products saturated to +-65504
        dq = d;
#pragma unroll
        for (int wi = 0; wi < 8; ++wi) {
          float v[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = static_cast<float>(static_cast<int8_t>(wd[wi] >> (8 * e))) * d;
          const uint32_t e02 = u32(__halves2half2(sat_half(v[0]), sat_half(v[2])));
          const uint32_t e13 = u32(__halves2half2(sat_half(v[1]), sat_half(v[3])));
          *reinterpret_cast<uint2*>(ab + b_offset<F>(NC, n, u, wi)) = make_uint2(e02, e13);
        }
      }
      if constexpr (F == kQ4K) {  // the unit's activation sum d * sum(q), for the -dmin * m term
        const float y = pd[j].y * (1.0f / (1 << kKS));
        const __half hi = sat_half(y);
        mb[n * 16 + u] = hi;
        mb[n * 16 + 8 + u] = __float2half_rn(y - __half2float(hi));
      } else {  // the two 16-element sums, for the -32 s term
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int wi = 0; wi < 4; ++wi) {
          s0 = __dp4a(static_cast<int>(wd[wi]), 0x01010101, s0);
          s1 = __dp4a(static_cast<int>(wd[wi + 4]), 0x01010101, s1);
        }
        const float sc = dq * (1.0f / (1 << kKS));
        const int jb = 8 * (u >> 2) + 2 * (u & 3);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const float y = static_cast<float>(i ? s1 : s0) * sc;
          const __half hi = sat_half(y);
          const int k = q6k_kappa(jb + i);
          mb[n * 32 + k] = hi;
          mb[n * 32 + 16 + k] = __float2half_rn(y - __half2float(hi));
        }
      }
    }
  };

  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

  const int ra = warp * 16 + g, rb = ra + 8;
  // Q6_K: byte misalignment of rows ra, rb's super-block 0 (their chunk c sits at (mis + 210 c) & 15
  // in the staged row).
  const int mis_a = static_cast<int>(reinterpret_cast<uintptr_t>(row_ptr(ra)) & 15);
  const int mis_b = static_cast<int>(reinterpret_cast<uintptr_t>(row_ptr(rb)) & 15);

  // ---------------------------------------------------------------- Q4_K chunk
  // Scales of sub-block pair t of the row at R: p1 = (s_2t, 2 s_2t+1), p2 = (-1024 s_2t,
  // -64 s_2t+1) for the low/high nibble dequantization, am = -2^kKS (dmin m_2t, dmin m_2t+1).
  auto q4k_scales = [&](const uint8_t* R, uint32_t& p1, uint32_t& p2, uint32_t& am) {
    const uint4 h = lds128(R);
    // 6-bit scales and mins of sub-blocks 0..3 (t < 2) or 4..7 (t >= 2), one per byte
    const uint32_t sc_lo = h.y & 0x3F3F3F3Fu, m_lo = h.z & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u);
    const uint32_t m_hi = ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u);
    const uint32_t sc = t < 2 ? sc_lo : sc_hi, m = t < 2 ? m_lo : m_hi;
    const uint32_t sel = (t & 1) ? 0x4342u : 0x4140u;  // bytes 2t, 2t+1 (mod 4) under the 1024 magic
    const uint32_t scp = hadd2(__byte_perm(sc, 0x64646464u, sel), kM1024x2);  // exact (sc_2t, sc_2t+1)
    const uint32_t mp = hadd2(__byte_perm(m, 0x64646464u, sel), kM1024x2);
    const uint32_t d2 = __byte_perm(h.x, 0, 0x1010), dm2 = __byte_perm(h.x, 0, 0x3232);
    const uint32_t s = hmul2(scp, d2);  // (s_2t, s_2t+1), rounded once
    p1 = hmul2(s, kOne_Two);             // exact
    p2 = hmul2(s, kM1024_M64);           // exact
    am = hmul2(mp, hmul2(dm2, kM16x2));  // -2^kKS dmin exact, times m rounded once
  };
  auto q4k_chunk = [&](const uint8_t* ws, const uint8_t* as, const uint8_t* ms) {
    const uint8_t* Ra = ws + ra * FI::PITCH;
    const uint8_t* Rb = ws + rb * FI::PITCH;
    uint32_t p1a, p2a, ama, p1b, p2b, amb;
    q4k_scales(Ra, p1a, p2a, ama);
    q4k_scales(Rb, p1b, p2b, amb);
    const uint4 a0 = lds128(Ra + 16 + 32 * t), a1 = lds128(Ra + 32 + 32 * t);
    const uint4 b0 = lds128(Rb + 16 + 32 * t), b1 = lds128(Rb + 32 + 32 * t);
    const uint32_t wa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const uint32_t wb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
    // -dmin m_j times the units' activation sums: k slots (2t, 2t+1) = sub-blocks (2t, 2t+1), hi
    // sums in slots 0..7, lo sums in 8..15.
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint8_t* mp = ms + (nt * 8 + g) * 32;
      mma16816(acc[nt], ama, amb, ama, amb, lds32(mp + 4 * t), lds32(mp + 16 + 4 * t));
    }
#pragma unroll
    for (int wi = 0; wi < 8; ++wi) {
      // word wi: bytes 4wi..4wi+3 of pair t; low nibbles = sub-block 2t, high = 2t + 1. Halves of
      // bytes (0, 2) and (1, 3): the order the activations were staged in.
      const uint32_t xa = wa[wi], ya = xa >> 8, xb = wb[wi], yb = xb >> 8;
      const uint32_t la02 = hfma2_lo((xa & 0x000F000Fu) | kMagic1024, p1a, p2a);
      const uint32_t la13 = hfma2_lo((ya & 0x000F000Fu) | kMagic1024, p1a, p2a);
      const uint32_t ha02 = hfma2_hi((xa & 0x00F000F0u) | kMagic32, p1a, p2a);
      const uint32_t ha13 = hfma2_hi((ya & 0x00F000F0u) | kMagic32, p1a, p2a);
      const uint32_t lb02 = hfma2_lo((xb & 0x000F000Fu) | kMagic1024, p1b, p2b);
      const uint32_t lb13 = hfma2_lo((yb & 0x000F000Fu) | kMagic1024, p1b, p2b);
      const uint32_t hb02 = hfma2_hi((xb & 0x00F000F0u) | kMagic32, p1b, p2b);
      const uint32_t hb13 = hfma2_hi((yb & 0x00F000F0u) | kMagic32, p1b, p2b);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint4 bf = lds128(as + ((wi * NC + nt * 8 + g) * 4 + t) * 16);
        mma16816(acc[nt], la02, lb02, la13, lb13, bf.x, bf.y);
        mma16816(acc[nt], ha02, hb02, ha13, hb13, bf.z, bf.w);
      }
    }
  };

  // ---------------------------------------------------------------- Q6_K chunk
  // A4: both rows' super-blocks are 4-byte aligned in shared memory (warp-uniform), else 8-byte
  // pieces are funnel-shifted out of three aligned words.
  auto q6k_chunk = [&](auto a4_tag, const uint8_t* ws, const uint8_t* as, const uint8_t* ms, int oa, int ob) {
    constexpr bool A4 = decltype(a4_tag)::value;
    const uint8_t* Da = ws + ra * FI::PITCH + oa;  // the super-block's first byte
    const uint8_t* Db = ws + rb * FI::PITCH + ob;
    const uint32_t sha = (oa & 2) * 8, shb = (ob & 2) * 8;
    auto ld8 = [&](const uint8_t* D, uint32_t sh, int o) -> uint2 {
      if constexpr (A4) {
        return make_uint2(lds32(D + o), lds32(D + o + 4));
      } else {
        const uint8_t* D4 = D - (sh >> 3);
        const uint32_t w0 = lds32(D4 + o), w1 = lds32(D4 + o + 4), w2 = lds32(D4 + o + 8);
        return make_uint2(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh));
      }
    };
    // Scales of the row: Sc[h][p] = (s of unit 4h + 2p, of 4h + 2p + 1) for sub-block half t >> 1,
    // Cc = -1024 Sc, Am[h] = -32 * 2^kKS Sc[h][t & 1] (the offset mma's A, k slots as q6k_kappa).
    auto scales = [&](const uint8_t* D, uint32_t sh, uint32_t (&Sc)[2][2], uint32_t (&Cc)[2][2], uint32_t (&Am)[2]) {
      const uint2 s01 = ld8(D, sh, 192), s23 = ld8(D, sh, 200);
      const uint32_t sw[4] = {s01.x, s01.y, s23.x, s23.y};
      const uint32_t d2 = __byte_perm(static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(D + 208)), 0, 0x1010);
      const uint32_t sel = (t >> 1) ? 0x4341u : 0x4240u;  // bytes (t>>1, t>>1 + 2) under the magic
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          const uint32_t scp = hadd2(__byte_perm(sw[2 * h + p] ^ 0x80808080u, 0x64646464u, sel), kM1152x2);
          Sc[h][p] = hmul2(scp, d2);
          Cc[h][p] = hmul2(Sc[h][p], kM1024x2);
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) Am[h] = hmul2((t & 1) ? Sc[h][1] : Sc[h][0], kM512x2);
    };
    uint32_t Sa[2][2], Ca[2][2], Ama[2], Sb[2][2], Cb[2][2], Amb[2];
    scales(Da, sha, Sa, Ca, Ama);
    scales(Db, shb, Sb, Cb, Amb);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint8_t* mp = ms + (nt * 8 + g) * 64;
      mma16816(acc[nt], Ama[0], Amb[0], Ama[1], Amb[1], lds32(mp + 4 * t), lds32(mp + 16 + 4 * t));
      mma16816(acc[nt], Ama[0], Amb[0], Ama[1], Amb[1], lds32(mp + 32 + 4 * t), lds32(mp + 48 + 4 * t));
    }
    // The 6-bit quants of 4 elements (one per byte) of units qd = 0..3 from the ql words A (qd 0,
    // 2), B (qd 1, 3) and qh word H.
    auto six = [](uint32_t A, uint32_t B, uint32_t H, uint32_t (&T)[4]) {
      T[0] = (A & 0x0F0F0F0Fu) | ((H << 4) & 0x30303030u);
      T[1] = (B & 0x0F0F0F0Fu) | ((H << 2) & 0x30303030u);
      T[2] = ((A >> 4) & 0x0F0F0F0Fu) | (H & 0x30303030u);
      T[3] = ((B >> 4) & 0x0F0F0F0Fu) | ((H >> 2) & 0x30303030u);
    };
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint2 qa_a = ld8(Da, sha, 64 * h + 8 * t), qb_a = ld8(Da, sha, 64 * h + 32 + 8 * t),
                  qh_a = ld8(Da, sha, 128 + 32 * h + 8 * t);
      const uint2 qa_b = ld8(Db, shb, 64 * h + 8 * t), qb_b = ld8(Db, shb, 64 * h + 32 + 8 * t),
                  qh_b = ld8(Db, shb, 128 + 32 * h + 8 * t);
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        uint32_t Ta[4], Tb[4];
        six(w ? qa_a.y : qa_a.x, w ? qb_a.y : qb_a.x, w ? qh_a.y : qh_a.x, Ta);
        six(w ? qa_b.y : qa_b.x, w ? qb_b.y : qb_b.x, w ? qh_b.y : qh_b.x, Tb);
        uint32_t a02[4], a13[4], b02[4], b13[4];
#pragma unroll
        for (int qd = 0; qd < 4; ++qd) {
          // s (q6 - 32) = round(s q6) here, -32 s in the offset mma
          const uint32_t xa02 = __byte_perm(Ta[qd], 0x64646464u, 0x4240), xa13 = __byte_perm(Ta[qd], 0x64646464u, 0x4341);
          const uint32_t xb02 = __byte_perm(Tb[qd], 0x64646464u, 0x4240), xb13 = __byte_perm(Tb[qd], 0x64646464u, 0x4341);
          if (qd & 1) {
            a02[qd] = hfma2_hi(xa02, Sa[h][qd >> 1], Ca[h][qd >> 1]);
            a13[qd] = hfma2_hi(xa13, Sa[h][qd >> 1], Ca[h][qd >> 1]);
            b02[qd] = hfma2_hi(xb02, Sb[h][qd >> 1], Cb[h][qd >> 1]);
            b13[qd] = hfma2_hi(xb13, Sb[h][qd >> 1], Cb[h][qd >> 1]);
          } else {
            a02[qd] = hfma2_lo(xa02, Sa[h][qd >> 1], Ca[h][qd >> 1]);
            a13[qd] = hfma2_lo(xa13, Sa[h][qd >> 1], Ca[h][qd >> 1]);
            b02[qd] = hfma2_lo(xb02, Sb[h][qd >> 1], Cb[h][qd >> 1]);
            b13[qd] = hfma2_lo(xb13, Sb[h][qd >> 1], Cb[h][qd >> 1]);
          }
        }
#pragma unroll
        for (int p = 0; p < 2; ++p)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint4 bf = lds128(as + (((((2 * h + w) * 2 + p) * NC) + nt * 8 + g) * 4 + t) * 16);
            mma16816(acc[nt], a02[2 * p], b02[2 * p], a13[2 * p], b13[2 * p], bf.x, bf.y);
            mma16816(acc[nt], a02[2 * p + 1], b02[2 * p + 1], a13[2 * p + 1], b13[2 * p + 1], bf.z, bf.w);
          }
      }
    }
  };

  // ---------------------------------------------------------------- pipeline
  // Iteration c: wait for chunk c's weights (S - 1 chunks were in flight), barrier (also: every
  // warp is done with chunk c - 1's buffers), stage chunk c + S - 1's weights, convert chunk c + 1's
  // activations (loaded into registers during chunk c - 1), load chunk c + 2's, multiply chunk c.
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (c0 + s < c1) stage_w(c0 + s, s);
    cp_async_commit();
  }
  if (c0 < c1) {
    load_act(c0);
    store_act(0);
  }
  if (c0 + 1 < c1) load_act(c0 + 1);
  int ws_i = 0;  // stage of chunk c
  for (int c = c0; c < c1; ++c) {
    const int it = c - c0;
    cp_async_wait<S - 2>();
    __syncthreads();
    if (c + S - 1 < c1) stage_w(c + S - 1, ws_i == 0 ? S - 1 : ws_i - 1);
    cp_async_commit();
    if (c + 1 < c1) store_act((it + 1) & 1);
    if (c + 2 < c1) load_act(c + 2);
    const uint8_t* ws = wbuf + ws_i * C::W_STAGE;
    const uint8_t* as = abuf + (it & 1) * C::A_BUF;
    const uint8_t* ms = mbuf + (it & 1) * C::BM_BUF;
    if constexpr (F == kQ4K) {
      q4k_chunk(ws, as, ms);
    } else {
      const int oa = (mis_a + c * 210) & 15, ob = (mis_b + c * 210) & 15;
      if (__all_sync(0xffffffffu, ((oa | ob) & 2) == 0))
        q6k_chunk(std::true_type{}, ws, as, ms, oa, ob);
      else
        q6k_chunk(std::false_type{}, ws, as, ms, oa, ob);
    }
    ws_i = ws_i + 1 == S ? 0 : ws_i + 1;
  }
  cp_async_wait<0>();

  // ---------------------------------------------------------------- epilogue
  // c[0], c[1]: row g, columns 2t, 2t + 1; c[2], c[3]: row g + 8.
  if constexpr (GLU) {
    // The 64 x NC sums through shared memory (the weight stages are free once every warp is past
    // its last chunk), then one warp per column: lane l holds gate and up of row 32 x + l.
    constexpr int P = NC + 1;  // odd pitch: a warp's column reads hit 32 banks
    static_assert(64 * P * 4 <= C::W_BYTES, "the GLU epilogue reuses the weight stages");
    float* hs = reinterpret_cast<float*>(smem);
    __syncthreads();
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) hs[(i >= 2 ? rb : ra) * P + nt * 8 + 2 * t + (i & 1)] = acc[nt][i];
    __syncthreads();
    const int n_ff = M / 2;
    for (int n = warp; n < N; n += kWarps) {
      const float gv = hs[lane * P + n], uv = hs[(32 + lane) * P + n];
      const float x = gv / (1.0f + expf(-gv)) * uv;
      warp_quantize_q8_1(x, lane, glu_qs + static_cast<int64_t>(n) * n_ff + blockIdx.x * 32,
                         glu_ds + static_cast<int64_t>(n) * (n_ff / 32) + blockIdx.x);
    }
    return;
  }
  const bool split = gridDim.z > 1;
  const int64_t o0 = bz * N * static_cast<int64_t>(M);  // this batch's first output
  float* out = split ? part + static_cast<int64_t>(blockIdx.z) * gridDim.y * N * static_cast<int64_t>(M) : dst_all;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + (i >= 2 ? rb : ra), n = nt * 8 + 2 * t + (i & 1);
      if (m >= M || n >= N) continue;
      const int64_t o = o0 + static_cast<int64_t>(n) * M + m;
      out[o] = !split && residual ? residual[o] + acc[nt][i] : acc[nt][i];
    }
}

// K splits: enough blocks for four per SM when the weight has few row tiles (the f16 block is
// lighter than mmq_kernel's, which aims at three), each split keeping at least two chunks to
// pipeline. A function of the weight shape and the device only, never of N (batch invariance).
// Tall weights (M >= 16384: gate|up, LM heads) are never split: splitting the 7B gate|up cost
// 35.6 -> 44.0 us at one row (docs/perf/2026-12-06-decode-launches.md), and an unsplit gate|up
// takes the SwiGLU epilogue (mmq_f16_swiglu) instead of a reduce and a SwiGLU launch.
int mmf16_k_splits(const KernelContext& kc, int64_t M, int U) {
  if (M >= 16384) return 1;
  constexpr int64_t kTargetPerSm = 4;
  const int64_t blocks = ceil_div(M, int64_t{16 * kWarps});
  const int64_t chunks = U / kUnits;
  const int64_t want = ceil_div(kTargetPerSm * kc.prop->multiProcessorCount, blocks);
  return static_cast<int>(std::clamp<int64_t>(want, 1, std::max<int64_t>(1, std::min<int64_t>(chunks / 2, 16))));
}

// Past 48 KiB a kernel must ask for its dynamic shared memory, once per instantiation.
template <int F, int NT, bool GLU>
void opt_in(const KernelContext& kc) {
  constexpr int kSmem = Cfg<F, NT>::SMEM;
  static const bool ok = [] {
    return cudaFuncSetAttribute(mmf16_kernel<F, NT, GLU>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) ==
           cudaSuccess;
  }();
  if (!ok) throw OpError(kc.where() + ": mmf16_kernel cannot have " + std::to_string(kSmem) + " bytes of shared memory");
}

// GLU launches (glu_qs set) come from mmq_f16_swiglu(), which checks their conditions.
template <int F, int NT, bool GLU>
int launch_nt(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2,
              int64_t B3, float* dst, const float* residual, float* part, bool reduce, int8_t* glu_qs,
              float2* glu_ds) {
  using C = Cfg<F, NT>;
  const int64_t M = a.ne[1];
  const int U = static_cast<int>(a.ne[0] / 32);
  const int ks = mmf16_k_splits(kc, M, U);
  if (ks > 1 && !part) throw std::logic_error(kc.where() + ": mmq (f16) needs scratch for its K splits");
  const dim3 grid(static_cast<unsigned>(ceil_div(M, int64_t{C::ROWS})), static_cast<unsigned>(B2 * B3),
                  static_cast<unsigned>(ks));
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
  opt_in<F, NT, GLU>(kc);
  mmf16_kernel<F, NT, GLU><<<grid, C::THREADS, C::SMEM, kc.stream>>>(
      static_cast<const uint8_t*>(a.data), static_cast<int64_t>(a.nb[1]), static_cast<int64_t>(a.nb[2]),
      static_cast<int64_t>(a.nb[3]), static_cast<int>(M), U, qs, ds, r2, r3, B2, static_cast<int>(N), dst, residual,
      part, glu_qs, glu_ds);
  kc.check_launch("mmf16_kernel");
  if (ks == 1 || !reduce) return ks;
  mmq_reduce(kc, part, ks, B2 * B3 * N * M, dst, residual);
  return 1;
}

// Tiles of 8, 16, 32 or 64 columns: four instantiations per format instead of eight (columns
// N..8 NT are computed on zeros and never stored). The 8-column tile halves the mmas and the
// activation traffic of one to eight rows, which mmvq() sends here for some weights
// (mmq_f16_every_row): 4-20 % faster there than the 16-column tile (docs/perf/2026-12-06-mmf16-tiles.md).
// The choice does not change a column's bits.
template <int F, bool GLU = false>
int launch_f(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
             float* dst, const float* residual, float* part, bool reduce, int8_t* glu_qs = nullptr,
             float2* glu_ds = nullptr) {
  if (N <= 8) return launch_nt<F, 1, GLU>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce, glu_qs, glu_ds);
  if (N <= 16) return launch_nt<F, 2, GLU>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce, glu_qs, glu_ds);
  if (N <= 32) return launch_nt<F, 4, GLU>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce, glu_qs, glu_ds);
  if (N <= kDecodeMaxRows) return launch_nt<F, 8, GLU>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce, glu_qs, glu_ds);
  throw std::logic_error(kc.where() + ": mmq (f16) with N > kDecodeMaxRows");
}

}  // namespace

bool mmq_f16_supported(const Tensor& a) {
  // Q4_K: every row (and batch slice) 16-byte aligned; Q6_K: 2-byte aligned.
  uint64_t align = 0;
  if (a.type == DType::Q4_K) align = 16;
  else if (a.type == DType::Q6_K) align = 2;
  else return false;
  const auto addr = reinterpret_cast<uintptr_t>(a.data);
  return a.ne[0] % 256 == 0 && a.ne[1] <= INT32_MAX && addr % align == 0 && a.nb[1] % align == 0 &&
         a.nb[2] % align == 0 && a.nb[3] % align == 0;
}

size_t mmq_f16_scratch(const KernelContext& kc, const Tensor& a, int64_t N, int64_t batches) {
  const int ks = mmf16_k_splits(kc, a.ne[1], static_cast<int>(a.ne[0] / 32));
  return ks > 1 ? static_cast<size_t>(ks) * static_cast<size_t>(batches * N * a.ne[1]) * 4 : 0;
}

int mmq_f16(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
            float* dst, const float* residual, float* part, bool reduce) {
  if (!mmq_f16_supported(a)) throw std::logic_error(kc.where() + ": mmq_f16 on an unsupported weight");
  if (a.type == DType::Q4_K) return launch_f<kQ4K>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
  return launch_f<kQ6K>(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
}

bool mmq_f16_swiglu_ok(const KernelContext& kc, const Tensor& wgu, int64_t N) {
  return wgu.ne[2] == 1 && wgu.ne[3] == 1 && wgu.ne[1] % 64 == 0 && wgu.ne[1] <= INT32_MAX &&
         mmq_runs_f16(wgu, N) && mmf16_k_splits(kc, wgu.ne[1], static_cast<int>(wgu.ne[0] / 32)) == 1;
}

void mmq_f16_swiglu(KernelContext& kc, const Tensor& wgu, const int8_t* qs, const float2* ds, int64_t N, int8_t* hq,
                    float2* hd) {
  if (!mmq_f16_swiglu_ok(kc, wgu, N)) throw std::logic_error(kc.where() + ": mmq_f16_swiglu on an unsupported weight");
  if (wgu.type == DType::Q4_K) launch_f<kQ4K, true>(kc, wgu, qs, ds, N, 1, 1, nullptr, nullptr, nullptr, true, hq, hd);
  else launch_f<kQ6K, true>(kc, wgu, qs, ds, N, 1, 1, nullptr, nullptr, nullptr, true, hq, hd);
}

}  // namespace minfer::cuda
