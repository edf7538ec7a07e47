// MMQ for decode batches: block-quantized weights times 1..64 activation rows on the int8 tensor
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
// A block holds 16 weight rows and KS warps; warp w takes a contiguous range of the row's units
// (32-element blocks). For unit u a thread of lane (g = lane / 4, t = lane % 4) holds the int8
// words of weight rows g and g + 8 at unit elements [4t, 4t + 4) and [16 + 4t, 16 + 4t + 4) — the
// mma A fragment — and, per 8-row tile of activations, the words of activation row g at the same
// elements — the B fragment. The int32 results are the unit dots of (row, activation) pairs and
// are scaled in f32: acc += d_a * (d_w0 * dot_lo + d_w1 * dot_hi) + m_w * s_a, in unit order; the
// KS warps' partial sums are added in warp order. Nothing depends on the number of activation
// rows N, so a row gets the same bits in every batch (batch invariance, as MMVQ gives up to 16
// rows): continuous batching and speculative verification reproduce single-row decoding.
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/quant_device.cuh"

namespace minfer::cuda {
namespace {

__device__ __forceinline__ int ld2(const uint8_t* p) {  // 2-byte aligned
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<int>(static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16));
}
__device__ __forceinline__ int ld4(const uint8_t* p) { return *reinterpret_cast<const int*>(p); }

// Bits b0..b3 of x placed at bit 4 of bytes 0..3.
__device__ __forceinline__ int bits_to_bit4(uint32_t x) {
  return static_cast<int>(((x << 4) & 0x10u) | ((x << 11) & 0x1000u) | ((x << 18) & 0x100000u) |
                          ((x << 25) & 0x10000000u));
}

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
  const int v = ld2(b + 2 + 4 * t);  // element i: low nibble of qs[i], element 16 + i: high nibble
  f.lo = v & 0x0F0F0F0F;
  f.hi = (v >> 4) & 0x0F0F0F0F;
  f.d0 = f.d1 = d;
  f.m = -8.0f * d;
}

template <>
__device__ __forceinline__ void frag<DType::Q4_1>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 20;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b);
  const int v = ld4(b + 4 + 4 * t);
  f.lo = v & 0x0F0F0F0F;
  f.hi = (v >> 4) & 0x0F0F0F0F;
  f.d0 = f.d1 = h2f(h[0]);
  f.m = h2f(h[1]);
}

template <>
__device__ __forceinline__ void frag<DType::Q5_0>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 22;
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b));
  const uint32_t qh = static_cast<uint32_t>(ld2(b + 2));
  const int v = ld2(b + 6 + 4 * t);
  f.lo = (v & 0x0F0F0F0F) | bits_to_bit4(qh >> (4 * t));
  f.hi = ((v >> 4) & 0x0F0F0F0F) | bits_to_bit4(qh >> (16 + 4 * t));
  f.d0 = f.d1 = d;
  f.m = -16.0f * d;
}

template <>
__device__ __forceinline__ void frag<DType::Q5_1>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 24;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b);
  const uint32_t qh = static_cast<uint32_t>(ld4(b + 4));
  const int v = ld4(b + 8 + 4 * t);
  f.lo = (v & 0x0F0F0F0F) | bits_to_bit4(qh >> (4 * t));
  f.hi = ((v >> 4) & 0x0F0F0F0F) | bits_to_bit4(qh >> (16 + 4 * t));
  f.d0 = f.d1 = h2f(h[0]);
  f.m = h2f(h[1]);
}

template <>
__device__ __forceinline__ void frag<DType::Q8_0>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + u * 34;
  f.lo = ld2(b + 2 + 4 * t);
  f.hi = ld2(b + 18 + 4 * t);
  f.d0 = f.d1 = h2f(*reinterpret_cast<const uint16_t*>(b));
  f.m = 0.0f;
}

// The scale and minimum of sub-block j of a Q4_K/Q5_K super-block (ggml's get_scale_min_k4 over
// the 12 packed bytes after d and dmin).
__device__ __forceinline__ void kquant_scale_min(const uint8_t* b, int j, float& d_sc, float& m_neg) {
  const uint8_t* q = b + 4;
  int sc, m;
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b);
  d_sc = h2f(h[0]) * static_cast<float>(sc);
  m_neg = -(h2f(h[1]) * static_cast<float>(m));
}

template <>
__device__ __forceinline__ void frag<DType::Q4_K>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + (u >> 3) * 144;
  const int j = u & 7, shift = 4 * (j & 1);
  const uint8_t* qs = b + 16 + 32 * (j >> 1);  // byte e: element e of sub-blocks 2i (low) and 2i + 1 (high)
  f.lo = (ld4(qs + 4 * t) >> shift) & 0x0F0F0F0F;
  f.hi = (ld4(qs + 16 + 4 * t) >> shift) & 0x0F0F0F0F;
  kquant_scale_min(b, j, f.d0, f.m);
  f.d1 = f.d0;
}

template <>
__device__ __forceinline__ void frag<DType::Q5_K>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + (u >> 3) * 176;
  const int j = u & 7, shift = 4 * (j & 1);
  const uint8_t* qs = b + 48 + 32 * (j >> 1);
  const uint8_t* qh = b + 16;  // bit j of byte e: the fifth bit of element e of sub-block j
  f.lo = ((ld4(qs + 4 * t) >> shift) & 0x0F0F0F0F) | (((ld4(qh + 4 * t) >> j) & 0x01010101) << 4);
  f.hi = ((ld4(qs + 16 + 4 * t) >> shift) & 0x0F0F0F0F) | (((ld4(qh + 16 + 4 * t) >> j) & 0x01010101) << 4);
  kquant_scale_min(b, j, f.d0, f.m);
  f.d1 = f.d0;
}

template <>
__device__ __forceinline__ void frag<DType::Q6_K>(const uint8_t* row, int u, int t, Frag& f) {
  const uint8_t* b = row + (u >> 3) * 210;
  const int j = u & 7, h = j >> 2, qd = j & 3;
  const uint8_t* ql = b + 64 * h + 32 * (qd & 1);
  const uint8_t* qh = b + 128 + 32 * h;
  const int ls = 4 * (qd >> 1), hs = 2 * qd;
  const int lo_l = (ld2(ql + 4 * t) >> ls) & 0x0F0F0F0F, lo_h = (ld2(qh + 4 * t) >> hs) & 0x03030303;
  const int hi_l = (ld2(ql + 16 + 4 * t) >> ls) & 0x0F0F0F0F, hi_h = (ld2(qh + 16 + 4 * t) >> hs) & 0x03030303;
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

constexpr int kRows = 16;  // weight rows per block (the mma's M)

// KS warps split the units of 16 rows; NT tiles of 8 activation rows.
template <DType T, int NT, int KS>
__global__ void __launch_bounds__(32 * KS) mmq_kernel(const uint8_t* w, int64_t w_nb1, int64_t w_nb2, int64_t w_nb3,
                                                       int64_t M, int U, const int8_t* qs, const float2* ds,
                                                       int64_t r2, int64_t r3, int64_t B2, int N, float* dst,
                                                       const float* residual) {
  __shared__ float part[KS][kRows][NT * 8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t bz = blockIdx.y, i2 = bz % B2, i3 = bz / B2;
  const uint8_t* base = w + (i2 / r2) * w_nb2 + (i3 / r3) * w_nb3;
  const uint8_t* row_a = base + min(m0 + g, M - 1) * w_nb1;
  const uint8_t* row_b = base + min(m0 + g + 8, M - 1) * w_nb1;
  const int64_t K = static_cast<int64_t>(U) * 32;
  const int8_t* q_base = qs + bz * N * K;
  const float2* d_base = ds + bz * static_cast<int64_t>(N) * U;
  // Activation rows this thread loads (B fragment: row g of each tile) and scales it applies (the
  // accumulator's columns 2t and 2t + 1 of each tile); rows past N read row 0 and are not stored.
  const int8_t* act[NT];
  const float2* sa[NT][2];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int n = nt * 8 + g;
    act[nt] = q_base + (n < N ? n : 0) * K;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int nc = nt * 8 + 2 * t + c;
      sa[nt][c] = d_base + static_cast<int64_t>(nc < N ? nc : 0) * U;
    }
  }
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

  const int u0 = static_cast<int>(static_cast<int64_t>(U) * warp / KS), u1 = static_cast<int>(static_cast<int64_t>(U) * (warp + 1) / KS);
  // Unrolled so the loads of several units are in flight together (decode is latency-bound).
#pragma unroll 4
  for (int u = u0; u < u1; ++u) {
    Frag fa, fb;
    frag<T>(row_a, u, t, fa);
    frag<T>(row_b, u, t, fb);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int8_t* ap = act[nt] + static_cast<int64_t>(u) * 32;
      const int b_lo = ld4(reinterpret_cast<const uint8_t*>(ap) + 4 * t);
      const int b_hi = ld4(reinterpret_cast<const uint8_t*>(ap) + 16 + 4 * t);
      const float2 s0 = sa[nt][0][u], s1 = sa[nt][1][u];
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
        int c[4];
        mma_k32(c, fa.lo, fb.lo, fa.hi, fb.hi, b_lo, b_hi);
        acc[nt][0] += s0.x * fa.d0 * static_cast<float>(c[0]) + fa.m * s0.y;
        acc[nt][1] += s1.x * fa.d0 * static_cast<float>(c[1]) + fa.m * s1.y;
        acc[nt][2] += s0.x * fb.d0 * static_cast<float>(c[2]) + fb.m * s0.y;
        acc[nt][3] += s1.x * fb.d0 * static_cast<float>(c[3]) + fb.m * s1.y;
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    part[warp][g][nt * 8 + 2 * t] = acc[nt][0];
    part[warp][g][nt * 8 + 2 * t + 1] = acc[nt][1];
    part[warp][g + 8][nt * 8 + 2 * t] = acc[nt][2];
    part[warp][g + 8][nt * 8 + 2 * t + 1] = acc[nt][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * NT * 8; i += blockDim.x) {
    const int r = i / (NT * 8), n = i % (NT * 8);
    const int64_t m = m0 + r;
    if (m >= M || n >= N) continue;
    float v = part[0][r][n];
#pragma unroll
    for (int k = 1; k < KS; ++k) v += part[k][r][n];
    const int64_t o = (bz * N + n) * M + m;
    dst[o] = residual ? residual[o] + v : v;
  }
}

// Warps per block: enough units per warp to keep loads in flight, at most 8. A function of the
// weight shape only, never of N (batch invariance).
int warps_for(int U) { return U >= 64 ? 8 : U >= 16 ? 4 : U >= 4 ? 2 : 1; }

template <DType T, int NT>
void launch_nt(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2,
               int64_t B3, float* dst, const float* residual) {
  const int64_t M = a.ne[1];
  const int U = static_cast<int>(a.ne[0] / 32);
  const dim3 grid(static_cast<unsigned>(ceil_div(M, kRows)), static_cast<unsigned>(B2 * B3));
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
  const auto* w = static_cast<const uint8_t*>(a.data);
  const auto nb1 = static_cast<int64_t>(a.nb[1]), nb2 = static_cast<int64_t>(a.nb[2]), nb3 = static_cast<int64_t>(a.nb[3]);
  const int n = static_cast<int>(N);
  switch (warps_for(U)) {
#define MINFER_KS(ks)                                                                                                \
  case ks:                                                                                                           \
    mmq_kernel<T, NT, ks><<<grid, 32 * ks, 0, kc.stream>>>(w, nb1, nb2, nb3, M, U, qs, ds, r2, r3, B2, n, dst, residual); \
    break;
    MINFER_KS(1) MINFER_KS(2) MINFER_KS(4) MINFER_KS(8)
#undef MINFER_KS
  }
  kc.check_launch("mmq_kernel");
}

template <DType T>
void launch_t(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
              float* dst, const float* residual) {
  switch ((N + 7) / 8) {
    case 1: return launch_nt<T, 1>(kc, a, qs, ds, N, B2, B3, dst, residual);
    case 2: return launch_nt<T, 2>(kc, a, qs, ds, N, B2, B3, dst, residual);
    case 3: return launch_nt<T, 3>(kc, a, qs, ds, N, B2, B3, dst, residual);
    case 4: return launch_nt<T, 4>(kc, a, qs, ds, N, B2, B3, dst, residual);
    case 5: return launch_nt<T, 5>(kc, a, qs, ds, N, B2, B3, dst, residual);
    case 6: return launch_nt<T, 6>(kc, a, qs, ds, N, B2, B3, dst, residual);
    case 7: return launch_nt<T, 7>(kc, a, qs, ds, N, B2, B3, dst, residual);
    case 8: return launch_nt<T, 8>(kc, a, qs, ds, N, B2, B3, dst, residual);
    default: throw std::logic_error(kc.where() + ": mmq with N > kDecodeMaxRows");
  }
}

}  // namespace

bool mmq_supported(DType type) {
  switch (type) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default: return false;
  }
}

void mmq(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
         float* dst, const float* residual) {
  switch (a.type) {
#define MINFER_T(T) \
  case DType::T: return launch_t<DType::T>(kc, a, qs, ds, N, B2, B3, dst, residual);
    MINFER_T(Q4_0) MINFER_T(Q4_1) MINFER_T(Q5_0) MINFER_T(Q5_1) MINFER_T(Q8_0)
    MINFER_T(Q4_K) MINFER_T(Q5_K) MINFER_T(Q6_K)
#undef MINFER_T
    default: throw OpError(kc.where() + ": no MMQ kernel for " + std::string(dtype_name(a.type)));
  }
}

}  // namespace minfer::cuda
