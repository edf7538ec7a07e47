// Decode-MMQ probe (not part of the library build): times the library's tensor-core MMQ
// (ops/cuda/k_mmq.cu, 9..64 activation rows) against f16 tensor-core variants on the Qwen2.5-7B
// decode shapes, and checks every kernel's outputs against a float64 CPU reference. Build here,
// run on the GPU machine:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -o /tmp/mmq_probe scripts/probes/mmq_probe.cu
//   /tmp/mmq_probe [shape-substring]      e.g. /tmp/mmq_probe q4k_down
// Prints one markdown row per shape x kernel x N: us per launch (median of graph replays), GB/s of
// weight bytes, max |err| / max |ref| over sampled outputs; a FAIL line when that exceeds 1e-2.
//
// Kernels
//   read   every weight byte once (16-byte loads, grid-stride): the streaming ceiling
//   base   the library's int8 mmq() (k_mmq.cu is #included verbatim; its K split and
//          mmq_reduce_kernel exactly as k_splits() picks them). Only KernelContext::where/
//          check_launch and dtype_traits are stubbed below (they live in .cpp files of the library),
//          and the f16 kernel's entry points (k_mmq_f16.cu, the `f16` variant below as the library
//          runs it), so that mmq() stays on the int8 kernel here.
//   f16    weights dequantized in registers to f16, mma.sync m16n8k16 f16 x f16 -> f32, one f32
//          accumulator per (row, column) over all of K (no per-unit rescale). 4 warps x 16 rows,
//          one super-block (256 elements) per chunk, weights staged with cp.async, 2 stages.
//   f16s   f16 with 4 cp.async weight stages (is latency the limit?)
//   f16w8  f16 with 8 warps (128 rows) per block, 3 stages (2 at N > 32): the block-shared
//          activation staging costs half as much per weight row
//   f16k   f16 with twice the K splits (more, shorter blocks for the narrow weights)
//
// Design of the f16 kernels (why they should issue fewer instructions than base):
// - base rescales each (row, column) accumulator per 32-element unit in f32 (I2F, FMUL, 2 FFMA),
//   i.e. ~20 instructions per 8-column tile per unit; here a tile costs 2 mma + 1 shared load per
//   unit, and the per-row cost is the dequantization: per 2 weights one LOP3 (nibbles into an f16
//   magic number) and one HFMA2.
// - Exact dequantization with one HFMA2 per 2 weights: x = magic | q is exactly 1024 + q
//   (0x6400) and fma(x, s, -1024 s) = round(s q) exactly, since -1024 s is exact (a power of two
//   times an f16) and the fma rounds once. For the high nibbles of Q4_K, left in bits 4..7, the
//   magic 0x5000 gives exactly 32 + q/2 and fma(x, 2s, -64 s) = round(s q). (Never fold a rounded
//   constant such as 1024 s + min into the fma: it cancels catastrophically. Never use s/16: it can
//   be subnormal for small scales.)
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
// - K splits are added by the last block of each row tile to arrive (atomic counter, summed in
//   split order: deterministic), so there is no second kernel; the split count depends on the
//   weight shape only (batch invariance, as base).
#include "ops/cuda/k_mmq.cu"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

// ------------------------------------------------------------------ stubs for k_mmq.cu
// Out-of-line library functions k_mmq.cu refers to (error paths only): defined here so the probe
// links without the library.
namespace minfer {
const DTypeTraits& dtype_traits(DType t) {
  static DTypeTraits tr{};
  tr.type = t;
  tr.name = "?";
  return tr;
}
namespace cuda {
std::string KernelContext::where() const { return "mmq_probe"; }
// Since the f16 kernel became the library's (ops/cuda/k_mmq_f16.cu), mmq() sends big Q4_K/Q6_K
// weights there; the probe keeps `base` the int8 mmq_kernel by saying no f16 weight is supported.
bool mmq_f16_supported(const Tensor&) { return false; }
size_t mmq_f16_scratch(const KernelContext&, const Tensor&, int64_t, int64_t) { return 0; }
void mmq_f16(KernelContext&, const Tensor&, const int8_t*, const float2*, int64_t, int64_t, int64_t, float*,
             const float*, float*) {
  fprintf(stderr, "mmq_probe: mmq_f16 is not linked\n");
  exit(1);
}
void KernelContext::check_launch(const char* kernel) const {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    fprintf(stderr, "launching %s failed: %s\n", kernel, cudaGetErrorString(e));
    exit(1);
  }
}
}  // namespace cuda
}  // namespace minfer

// ------------------------------------------------------------------ read ceiling
__global__ void read_kernel(const int4* __restrict__ w, int64_t n16, float* out) {
  int acc = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n16; i += (int64_t)gridDim.x * blockDim.x) {
    const int4 v = __ldg(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) out[0] = 1.0f;
}

// ------------------------------------------------------------------ f16 MMQ
namespace mmf16 {

using minfer::cuda::cp_async16;
using minfer::cuda::cp_async_commit;
using minfer::cuda::cp_async_wait;

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

template <int F, int NT, int WARPS, int S>
struct Cfg {
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

__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
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

// Rows [m0, m0 + 16 WARPS) of the weight times N <= 8 NT activation rows over the chunks of
// split blockIdx.y; see the header comment for the scheme.
template <int F, int NT, int WARPS, int S>
__global__ void __launch_bounds__(32 * WARPS) mmf16_kernel(const uint8_t* __restrict__ w, int64_t nb1, int M, int U,
                                                           const int8_t* __restrict__ qs, const float2* __restrict__ ds,
                                                           int N, float* __restrict__ dst, float* __restrict__ part,
                                                           unsigned* __restrict__ counters) {
  using C = Cfg<F, NT, WARPS, S>;
  using FI = Fmt<F>;
  constexpr int NC = C::NC, ROWS = C::ROWS, THREADS = C::THREADS;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* const wbuf = smem;                      // S stages of ROWS x PITCH weight bytes
  uint8_t* const abuf = smem + C::W_BYTES;         // 2 buffers of f16 activations
  uint8_t* const mbuf = abuf + 2 * C::A_BUF;       // 2 buffers of offset-term sums
  __shared__ bool s_last;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int m0 = blockIdx.x * ROWS;
  const int n_chunks = U / kUnits;
  const int c0 = static_cast<int>(static_cast<int64_t>(n_chunks) * blockIdx.y / gridDim.y);
  const int c1 = static_cast<int>(static_cast<int64_t>(n_chunks) * (blockIdx.y + 1) / gridDim.y);
  const int64_t K = static_cast<int64_t>(U) * 32;
  auto row_ptr = [&](int r) { return w + static_cast<int64_t>(min(m0 + r, M - 1)) * nb1; };

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
      const int8_t* src = qs + n * K + (static_cast<int64_t>(c) * kUnits + u) * 32;
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
  const bool split = gridDim.y > 1;
  float* out = split ? part + static_cast<int64_t>(blockIdx.y) * N * M : dst;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + (i >= 2 ? rb : ra), n = nt * 8 + 2 * t + (i & 1);
      if (m < M && n < N) out[static_cast<int64_t>(n) * M + m] = acc[nt][i];
    }
  if (!split) return;
  // The last split block of this row tile adds the partial sums in split order.
  __threadfence();
  __syncthreads();
  if (tid == 0) s_last = atomicAdd(counters + blockIdx.x, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  const int64_t plane = static_cast<int64_t>(N) * M;
  for (int i = tid; i < ROWS * N; i += THREADS) {
    const int n = i / ROWS, m = m0 + i % ROWS;
    if (m >= M) continue;
    const int64_t o = static_cast<int64_t>(n) * M + m;
    float v = __ldcg(part + o);
    for (int z = 1; z < static_cast<int>(gridDim.y); ++z) v += __ldcg(part + z * plane + o);
    dst[o] = v;
  }
  if (tid == 0) counters[blockIdx.x] = 0;  // ready for the next launch
}

// K splits: enough blocks for `target` per SM when the weight has few row tiles, each split
// keeping at least two chunks (k_splits' rule with the block's rows); never a function of N.
int k_splits(int sms, int64_t M, int rows, int U, int target) {
  const int64_t blocks = (M + rows - 1) / rows, chunks = U / kUnits;
  const int64_t want = (static_cast<int64_t>(target) * sms + blocks - 1) / blocks;
  return static_cast<int>(std::clamp<int64_t>(want, 1, std::max<int64_t>(1, std::min<int64_t>(chunks / 2, 16))));
}

template <int F, int NT, int WARPS, int S>
void launch(const uint8_t* w, int64_t nb1, int M, int U, const int8_t* qs, const float2* ds, int N, float* dst,
            float* part, unsigned* counters, int ks, cudaStream_t st) {
  using C = Cfg<F, NT, WARPS, S>;
  static const bool ok = [] {
    CK(cudaFuncSetAttribute(mmf16_kernel<F, NT, WARPS, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    return true;
  }();
  (void)ok;
  const dim3 grid(static_cast<unsigned>((M + C::ROWS - 1) / C::ROWS), static_cast<unsigned>(ks));
  mmf16_kernel<F, NT, WARPS, S><<<grid, C::THREADS, C::SMEM, st>>>(w, nb1, M, U, qs, ds, N, dst, part, counters);
}

// Occupancy of one instantiation (blocks per SM), for the report.
template <int F, int NT, int WARPS, int S>
int occupancy() {
  using C = Cfg<F, NT, WARPS, S>;
  CK(cudaFuncSetAttribute(mmf16_kernel<F, NT, WARPS, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
  int b = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, mmf16_kernel<F, NT, WARPS, S>, C::THREADS, C::SMEM));
  return b;
}

}  // namespace mmf16

// ------------------------------------------------------------------ host
static float f16_to_f32(uint16_t h) {
  const uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, f = h & 1023;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(f), -24);
  else if (e == 31) v = f ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(f | 1024), static_cast<int>(e) - 25);
  return s ? -v : v;
}
static uint16_t f32_to_f16(float x) {
  const __half h = __float2half(x);
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}

// Reference dequantization (ggml's formulas) in float64.
static void deq_row(int type, const uint8_t* row, int K, std::vector<double>& y) {
  y.resize(K);
  for (int b = 0; b < K / 256; ++b) {
    double* o = y.data() + 256 * b;
    if (type == 0) {
      const uint8_t* x = row + 144 * b;
      uint16_t dh, mh;
      memcpy(&dh, x, 2);
      memcpy(&mh, x + 2, 2);
      const double d = f16_to_f32(dh), dmin = f16_to_f32(mh);
      const uint8_t* sc = x + 4;
      const uint8_t* q = x + 16;
      for (int j = 0; j < 8; ++j) {
        int s, m;
        if (j < 4) {
          s = sc[j] & 63;
          m = sc[j + 4] & 63;
        } else {
          s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
          m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        }
        for (int l = 0; l < 32; ++l) {
          const int qv = (j & 1) ? (q[32 * (j >> 1) + l] >> 4) : (q[32 * (j >> 1) + l] & 0xF);
          o[32 * j + l] = d * s * qv - dmin * m;
        }
      }
    } else {
      const uint8_t* x = row + 210 * b;
      uint16_t dh;
      memcpy(&dh, x + 208, 2);
      const double d = f16_to_f32(dh);
      const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = x + 64 * h;
        const uint8_t* qh = x + 128 + 32 * h;
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          o[128 * h + l] = d * sc[8 * h + is] * q1;
          o[128 * h + l + 32] = d * sc[8 * h + is + 2] * q2;
          o[128 * h + l + 64] = d * sc[8 * h + is + 4] * q3;
          o[128 * h + l + 96] = d * sc[8 * h + is + 6] * q4;
        }
      }
    }
  }
}

// splitmix64: fast enough to fill the 447 MB LM head.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

struct Shape {
  const char* name;
  int type;  // 0 = Q4_K, 1 = Q6_K
  int K, M;
};

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : nullptr;
  constexpr int NMAX = 64;
  const int Ns[] = {9, 16, 32, 64};
  const std::vector<Shape> shapes = {
      {"q4k_gate_up_3584x37888", 0, 3584, 37888}, {"q4k_qkv_3584x4608", 0, 3584, 4608},
      {"q4k_wo_3584x3584", 0, 3584, 3584},        {"q4k_down_18944x3584", 0, 18944, 3584},
      {"q6k_down_18944x3584", 1, 18944, 3584},    {"q6k_lm_head_3584x152064", 1, 3584, 152064},
  };
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  const int sms = prop.multiProcessorCount;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* dscratch;
  CK(cudaMalloc(&dscratch, 16));

  minfer::cuda::KernelContext kc{};
  kc.stream = st;
  kc.prop = &prop;

  // Per-variant K-split targets (blocks per SM; base's k_splits uses 3).
  constexpr int kTargetF16 = 4, kTargetF16s = 4, kTargetW8 = 2, kTargetF16k = 8;
  printf("# %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  printf("# blocks/SM (occupancy) Q4_K f16 NT2/4/8: %d %d %d, f16s: %d %d %d, f16w8: %d %d %d\n",
         mmf16::occupancy<0, 2, 4, 2>(), mmf16::occupancy<0, 4, 4, 2>(), mmf16::occupancy<0, 8, 4, 2>(),
         mmf16::occupancy<0, 2, 4, 4>(), mmf16::occupancy<0, 4, 4, 4>(), mmf16::occupancy<0, 8, 4, 4>(),
         mmf16::occupancy<0, 2, 8, 3>(), mmf16::occupancy<0, 4, 8, 3>(), mmf16::occupancy<0, 8, 8, 2>());
  printf("# blocks/SM (occupancy) Q6_K f16 NT2/4/8: %d %d %d, f16s: %d %d %d, f16w8: %d %d %d\n",
         mmf16::occupancy<1, 2, 4, 2>(), mmf16::occupancy<1, 4, 4, 2>(), mmf16::occupancy<1, 8, 4, 2>(),
         mmf16::occupancy<1, 2, 4, 4>(), mmf16::occupancy<1, 4, 4, 4>(), mmf16::occupancy<1, 8, 4, 4>(),
         mmf16::occupancy<1, 2, 8, 3>(), mmf16::occupancy<1, 4, 8, 3>(), mmf16::occupancy<1, 8, 8, 2>());
  printf("| shape | kernel | N | splits | us | GB/s | max rel err |\n|---|---|---|---|---|---|---|\n");
  int fails = 0;
  Rng rng{12345};
  for (const Shape& sh : shapes) {
    if (filter && !strstr(sh.name, filter)) continue;
    const int BB = sh.type == 0 ? 144 : 210, nblk = sh.K / 256, U = sh.K / 32;
    const int64_t nb1 = static_cast<int64_t>(nblk) * BB, wbytes = nb1 * sh.M;
    // Enough copies that one graph's launches stream > 3x the 60 MB L2 (the LM head needs one).
    const int copies = static_cast<int>(std::max<int64_t>(1, (192LL << 20) / wbytes + 1));
    const int reps = static_cast<int>(std::clamp<int64_t>((1536LL << 20) / wbytes, 8, 200));

    // Weights: random quant bytes, sane positive f16 scales (Q6_K's int8 sub-scales are random bytes).
    std::vector<uint8_t> hw(wbytes);
    for (int64_t i = 0; i + 8 <= wbytes; i += 8) {
      const uint64_t v = rng.next();
      memcpy(hw.data() + i, &v, 8);
    }
    for (int64_t blk = 0; blk < static_cast<int64_t>(nblk) * sh.M; ++blk) {
      uint8_t* x = hw.data() + blk * BB;
      const uint16_t d = f32_to_f16(static_cast<float>(1e-3 + 9e-3 * rng.uniform()));
      const uint16_t dm = f32_to_f16(static_cast<float>(1e-3 + 9e-3 * rng.uniform()));
      if (sh.type == 0) {
        memcpy(x, &d, 2);
        memcpy(x + 2, &dm, 2);
      } else {
        memcpy(x + 208, &d, 2);
      }
    }
    uint8_t* dw;
    // +256: Q6_K chunks are staged from the 16-byte boundary below them and widened to 14 pieces,
    // which may read up to 14 bytes past the last row (base reads up to 15).
    CK(cudaMalloc(&dw, wbytes * copies + 256));
    for (int c = 0; c < copies; ++c) CK(cudaMemcpy(dw + wbytes * c, hw.data(), wbytes, cudaMemcpyHostToDevice));
    if (sh.type == 0 && (nb1 % 16 != 0 || reinterpret_cast<uintptr_t>(dw) % 16 != 0)) {
      fprintf(stderr, "f16 Q4_K kernels need 16-byte aligned rows\n");
      return 1;
    }

    // Activations: N(0, 1) plus a per-channel offset (real hidden states are not zero-mean: this
    // exercises the min / offset terms) and rare outliers, quantized to q8_1 planes on the host.
    std::vector<double> bias(sh.K);
    for (auto& b : bias) b = 0.5 * rng.normal();
    std::vector<int8_t> hq(static_cast<size_t>(NMAX) * sh.K);
    std::vector<float2> hd(static_cast<size_t>(NMAX) * U);
    for (int n = 0; n < NMAX; ++n)
      for (int u = 0; u < U; ++u) {
        float x[32], amax = 0;
        for (int i = 0; i < 32; ++i) {
          double v = rng.normal() + bias[32 * u + i];
          if (rng.uniform() < 1e-3) v *= 20.0;
          x[i] = static_cast<float>(v);
          amax = std::max(amax, std::fabs(x[i]));
        }
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        int s = 0;
        for (int i = 0; i < 32; ++i) {
          const int q = std::clamp(static_cast<int>(std::lround(x[i] * id)), -127, 127);
          hq[static_cast<size_t>(n) * sh.K + 32 * u + i] = static_cast<int8_t>(q);
          s += q;
        }
        hd[static_cast<size_t>(n) * U + u] = make_float2(d, d * static_cast<float>(s));
      }
    int8_t* dq;
    float2* dd;
    float* dy;
    CK(cudaMalloc(&dq, hq.size()));
    CK(cudaMalloc(&dd, hd.size() * sizeof(float2)));
    CK(cudaMalloc(&dy, static_cast<size_t>(NMAX) * sh.M * 4));
    CK(cudaMemcpy(dq, hq.data(), hq.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dd, hd.data(), hd.size() * sizeof(float2), cudaMemcpyHostToDevice));

    // K splits of every variant, and scratch for the largest.
    minfer::Tensor a;
    a.type = sh.type == 0 ? minfer::DType::Q4_K : minfer::DType::Q6_K;
    a.ne = {sh.K, sh.M, 1, 1};
    a.nb = {static_cast<size_t>(BB), static_cast<size_t>(nb1), static_cast<size_t>(nb1 * sh.M),
            static_cast<size_t>(nb1 * sh.M)};
    const int ks_f16 = mmf16::k_splits(sms, sh.M, 64, U, kTargetF16);
    const int ks_f16s = mmf16::k_splits(sms, sh.M, 64, U, kTargetF16s);
    const int ks_w8 = mmf16::k_splits(sms, sh.M, 128, U, kTargetW8);
    const int ks_f16k = mmf16::k_splits(sms, sh.M, 64, U, kTargetF16k);
    const int ks_max = std::max({ks_f16, ks_f16s, ks_w8, ks_f16k});
    const size_t base_scratch = minfer::cuda::mmq_scratch(kc, a, NMAX, 1);
    const size_t part_bytes = std::max(base_scratch, static_cast<size_t>(ks_max) * NMAX * sh.M * 4);
    float* dpart;
    unsigned* dcnt;
    CK(cudaMalloc(&dpart, part_bytes + 16));
    CK(cudaMalloc(&dcnt, ((sh.M + 63) / 64) * sizeof(unsigned)));
    CK(cudaMemset(dcnt, 0, ((sh.M + 63) / 64) * sizeof(unsigned)));
    const int ks_base = static_cast<int>(base_scratch ? base_scratch / (static_cast<size_t>(NMAX) * sh.M * 4) : 1);

    // Reference on a sample of rows (tile edges, ends, random).
    std::vector<int> sample = {0, 1, 7, 8, 15, 16, 63, 64, 127, 128, sh.M / 2, sh.M - 129, sh.M - 65, sh.M - 64, sh.M - 2, sh.M - 1};
    while (sample.size() < 128) sample.push_back(static_cast<int>(rng.next() % sh.M));
    std::vector<std::vector<double>> ref(NMAX, std::vector<double>(sample.size()));
    {
      std::vector<double> y, act(sh.K);
      std::vector<std::vector<double>> acts(NMAX, std::vector<double>(sh.K));
      for (int n = 0; n < NMAX; ++n)
        for (int k = 0; k < sh.K; ++k)
          acts[n][k] = static_cast<double>(hd[static_cast<size_t>(n) * U + k / 32].x) * hq[static_cast<size_t>(n) * sh.K + k];
      for (size_t si = 0; si < sample.size(); ++si) {
        deq_row(sh.type, hw.data() + static_cast<int64_t>(sample[si]) * nb1, sh.K, y);
        for (int n = 0; n < NMAX; ++n) {
          double s = 0;
          for (int k = 0; k < sh.K; ++k) s += y[k] * acts[n][k];
          ref[n][si] = s;
        }
      }
    }
    auto check = [&](int N) {
      std::vector<float> out(static_cast<size_t>(N) * sh.M);
      CK(cudaMemcpy(out.data(), dy, out.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0, scale = 0;
      for (int n = 0; n < N; ++n)
        for (size_t si = 0; si < sample.size(); ++si) scale = std::max(scale, std::fabs(ref[n][si]));
      for (int n = 0; n < N; ++n)
        for (size_t si = 0; si < sample.size(); ++si) {
          const double o = out[static_cast<size_t>(n) * sh.M + sample[si]];
          if (!std::isfinite(o)) return 1e30;
          worst = std::max(worst, std::fabs(o - ref[n][si]));
        }
      return worst / scale;
    };
    auto bench = [&](const char* kname, int N, int ks, const std::function<void(const uint8_t*)>& launch) {
      CK(cudaMemsetAsync(dy, 0xFF, static_cast<size_t>(NMAX) * sh.M * 4, st));  // NaN: unwritten outputs fail
      launch(dw);
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(st));
      const double err = N ? check(N) : 0.0;
      cudaGraph_t gr;
      cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < reps; ++i) launch(dw + wbytes * (i % copies));
      CK(cudaStreamEndCapture(st, &gr));
      CK(cudaGraphInstantiate(&ge, gr, 0));
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<float> ts;
      for (int it = 0; it < 8; ++it) {  // one warm-up, then 7 timed replays
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (it > 0) ts.push_back(ms);
      }
      std::sort(ts.begin(), ts.end());
      const double us = ts[ts.size() / 2] * 1000.0 / reps;
      printf("| %s | %s | %d | %d | %.2f | %.0f | %.2e |\n", sh.name, kname, N, ks, us, wbytes / us / 1e3, err);
      if (N && !(err <= 1e-2)) {
        printf("FAIL %s %s N=%d max rel err %.3e\n", sh.name, kname, N, err);
        ++fails;
      }
      fflush(stdout);
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      CK(cudaGraphExecDestroy(ge));
      CK(cudaGraphDestroy(gr));
    };

    bench("read", 0, 1, [&](const uint8_t* w) {
      read_kernel<<<sms * 16, 256, 0, st>>>(reinterpret_cast<const int4*>(w), wbytes / 16, dscratch);
    });
    for (const int N : Ns) {
      bench("base", N, ks_base, [&](const uint8_t* w) {
        a.data = const_cast<uint8_t*>(w);
        minfer::cuda::mmq(kc, a, dq, dd, N, 1, 1, dy, nullptr, base_scratch ? dpart : nullptr);
      });
      // The f16 variants, NT = ceil(N / 8) rounded up to 2, 4 or 8 tiles.
      auto f16 = [&](auto f_tag, auto w_tag, auto s_tag, auto s64_tag, int ks) {
        constexpr int F = decltype(f_tag)::value, W = decltype(w_tag)::value, S = decltype(s_tag)::value,
                      S64 = decltype(s64_tag)::value;
        return [&, ks](const uint8_t* w) {
          if (N <= 16) mmf16::launch<F, 2, W, S>(w, nb1, sh.M, U, dq, dd, N, dy, dpart, dcnt, ks, st);
          else if (N <= 32) mmf16::launch<F, 4, W, S>(w, nb1, sh.M, U, dq, dd, N, dy, dpart, dcnt, ks, st);
          else mmf16::launch<F, 8, W, S64>(w, nb1, sh.M, U, dq, dd, N, dy, dpart, dcnt, ks, st);
        };
      };
      using I2 = std::integral_constant<int, 2>;
      using I3 = std::integral_constant<int, 3>;
      using I4 = std::integral_constant<int, 4>;
      using I8 = std::integral_constant<int, 8>;
      if (sh.type == 0) {
        using F = std::integral_constant<int, 0>;
        bench("f16", N, ks_f16, f16(F{}, I4{}, I2{}, I2{}, ks_f16));
        bench("f16s", N, ks_f16s, f16(F{}, I4{}, I4{}, I4{}, ks_f16s));
        bench("f16w8", N, ks_w8, f16(F{}, I8{}, I3{}, I2{}, ks_w8));
        bench("f16k", N, ks_f16k, f16(F{}, I4{}, I2{}, I2{}, ks_f16k));
      } else {
        using F = std::integral_constant<int, 1>;
        bench("f16", N, ks_f16, f16(F{}, I4{}, I2{}, I2{}, ks_f16));
        bench("f16s", N, ks_f16s, f16(F{}, I4{}, I4{}, I4{}, ks_f16s));
        bench("f16w8", N, ks_w8, f16(F{}, I8{}, I3{}, I2{}, ks_w8));
        bench("f16k", N, ks_f16k, f16(F{}, I4{}, I2{}, I2{}, ks_f16k));
      }
    }
    CK(cudaFree(dw));
    CK(cudaFree(dq));
    CK(cudaFree(dd));
    CK(cudaFree(dy));
    CK(cudaFree(dpart));
    CK(cudaFree(dcnt));
  }
  printf("%s: %d failures\n", fails ? "FAILED" : "ok", fails);
  return fails ? 1 : 0;
}
