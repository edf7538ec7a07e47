// MMVQ: the dp4a decode matmul for block-quantized weights that the tensor-core MMQ (k_mmq.cu)
// lacks (N <= kMatvecMaxRows = 16 activation rows); mmvq() is the one entry point of both.
//
// Activations are quantized once per matmul to q8_1 planes (int8 quants [rows][K] and per
// 32-element block float2 (d, d * sum(q))). Each warp computes one weight row: lane l walks the
// row's 32-element units l, l + 32, ...; a unit's weight quants are unpacked into eight 32-bit
// words of int8 lanes and dotted with the activation quants by __dp4a, then scaled:
//   unit = d_a * (d0 * dot(q[0..15]) + d1 * dot(q[16..31])) + min terms,
// where d0/d1 are the weight's (sub-)block scales and the min terms use the activation sums
// (ggml's MMVQ design, llama.cpp ggml-cuda/mmvq.cu and vecdotq.cuh; this is an independent
// implementation over the block layouts of tensor/quants_blocks.h).
#include <algorithm>

#include "ops/cuda/kernels.cuh"
#include "ops/cuda/quant_device.cuh"

namespace minfer::cuda {
namespace {

struct WUnit {
  int q[8];
  float d0, d1;  // scales of elements 0..15 and 16..31
  float m0, m1;  // min terms: total (MIN = 1, m0 only) or per 16 (MIN = 2)
};

template <DType T>
struct UnitTraits;  // HALF: d0 != d1; MIN: 0 none, 1 total (x s_a), 2 per 16 elements

template <> struct UnitTraits<DType::Q4_0> { static constexpr bool HALF = false; static constexpr int MIN = 1; };
template <> struct UnitTraits<DType::Q4_1> { static constexpr bool HALF = false; static constexpr int MIN = 1; };
template <> struct UnitTraits<DType::Q5_0> { static constexpr bool HALF = false; static constexpr int MIN = 1; };
template <> struct UnitTraits<DType::Q5_1> { static constexpr bool HALF = false; static constexpr int MIN = 1; };
template <> struct UnitTraits<DType::Q8_0> { static constexpr bool HALF = false; static constexpr int MIN = 0; };
template <> struct UnitTraits<DType::Q2_K> { static constexpr bool HALF = true; static constexpr int MIN = 2; };
template <> struct UnitTraits<DType::Q3_K> { static constexpr bool HALF = true; static constexpr int MIN = 0; };
template <> struct UnitTraits<DType::Q4_K> { static constexpr bool HALF = false; static constexpr int MIN = 1; };
template <> struct UnitTraits<DType::Q5_K> { static constexpr bool HALF = false; static constexpr int MIN = 1; };
template <> struct UnitTraits<DType::Q6_K> { static constexpr bool HALF = true; static constexpr int MIN = 0; };

template <DType T>
__device__ __forceinline__ void decode_unit(const uint8_t* row, int u, WUnit& w);

template <>
__device__ __forceinline__ void decode_unit<DType::Q4_0>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + u * 18;
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b));
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int v = ld_i32_a2(b + 2 + 4 * j);
    w.q[j] = v & 0x0F0F0F0F;
    w.q[j + 4] = (v >> 4) & 0x0F0F0F0F;
  }
  w.d0 = w.d1 = d;
  w.m0 = -8.0f * d;
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q4_1>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + u * 20;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int v = ld_i32_a4(b + 4 + 4 * j);
    w.q[j] = v & 0x0F0F0F0F;
    w.q[j + 4] = (v >> 4) & 0x0F0F0F0F;
  }
  w.d0 = w.d1 = h2f(h[0]);
  w.m0 = h2f(h[1]);
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q5_0>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + u * 22;
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b));
  const uint32_t qh = static_cast<uint32_t>(ld_i32_a2(b + 2));
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int v = ld_i32_a2(b + 6 + 4 * j);
    w.q[j] = (v & 0x0F0F0F0F) | spread4_bit4(qh >> (4 * j));
    w.q[j + 4] = ((v >> 4) & 0x0F0F0F0F) | spread4_bit4(qh >> (16 + 4 * j));
  }
  w.d0 = w.d1 = d;
  w.m0 = -16.0f * d;
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q5_1>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + u * 24;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b);
  const uint32_t qh = static_cast<uint32_t>(ld_i32_a4(b + 4));
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int v = ld_i32_a4(b + 8 + 4 * j);
    w.q[j] = (v & 0x0F0F0F0F) | spread4_bit4(qh >> (4 * j));
    w.q[j + 4] = ((v >> 4) & 0x0F0F0F0F) | spread4_bit4(qh >> (16 + 4 * j));
  }
  w.d0 = w.d1 = h2f(h[0]);
  w.m0 = h2f(h[1]);
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q8_0>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + u * 34;
#pragma unroll
  for (int j = 0; j < 8; ++j) w.q[j] = ld_i32_a2(b + 2 + 4 * j);
  w.d0 = w.d1 = h2f(*reinterpret_cast<const uint16_t*>(b));
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q2_K>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + (u >> 3) * 84;
  const int j = u & 7, shift = 2 * (j & 3);
  const uint8_t* qs = b + 16 + 32 * (j >> 2);
#pragma unroll
  for (int i = 0; i < 8; ++i) w.q[i] = (ld_i32_a4(qs + 4 * i) >> shift) & 0x03030303;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(b + 80);
  const float d = h2f(h[0]), dmin = h2f(h[1]);
  const int s0 = b[2 * j], s1 = b[2 * j + 1];
  w.d0 = d * static_cast<float>(s0 & 0xF);
  w.d1 = d * static_cast<float>(s1 & 0xF);
  w.m0 = -dmin * static_cast<float>(s0 >> 4);
  w.m1 = -dmin * static_cast<float>(s1 >> 4);
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q3_K>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + (u >> 3) * 110;
  const int j = u & 7, shift = 2 * (j & 3);
  const uint8_t* qs = b + 32 + 32 * (j >> 2);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int q2 = (ld_i32_a2(qs + 4 * i) >> shift) & 0x03030303;
    const int hb = (ld_i32_a2(b + 4 * i) >> j) & 0x01010101;
    w.q[i] = __vsubss4(q2 | (hb << 2), 0x04040404);
  }
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b + 108));
  w.d0 = d * static_cast<float>(q3k_scale(b + 96, 2 * j) - 32);
  w.d1 = d * static_cast<float>(q3k_scale(b + 96, 2 * j + 1) - 32);
}

// The first 16 bytes of a Q4_K/Q5_K block (d, dmin, the 12 packed scale bytes) as one int4; the
// 6-bit scale and min of sub-block j are unpacked in registers (ggml's get_scale_min_k4).
__device__ __forceinline__ void kquant_header(const uint8_t* b, int j, float& d_sc, float& m_neg) {
  const int4 hdr = *reinterpret_cast<const int4*>(b);
  const int sh = 8 * (j & 3);
  const int yb = (hdr.y >> sh) & 0xFF, zb = (hdr.z >> sh) & 0xFF, wb = (hdr.w >> sh) & 0xFF;
  int sc, m;
  if (j < 4) {
    sc = yb & 63;
    m = zb & 63;
  } else {
    sc = (wb & 0xF) | ((yb >> 6) << 4);
    m = (wb >> 4) | ((zb >> 6) << 4);
  }
  const float d = h2f(static_cast<uint16_t>(hdr.x & 0xFFFF)), dmin = h2f(static_cast<uint16_t>(hdr.x >> 16));
  d_sc = d * static_cast<float>(sc);
  m_neg = -(dmin * static_cast<float>(m));
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q4_K>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + (u >> 3) * 144;
  const int j = u & 7, shift = 4 * (j & 1);
  const int4* qs = reinterpret_cast<const int4*>(b + 16 + 32 * (j >> 1));
  const int4 v0 = qs[0], v1 = qs[1];
  const int vv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) w.q[i] = (vv[i] >> shift) & 0x0F0F0F0F;
  kquant_header(b, j, w.d0, w.m0);
  w.d1 = w.d0;
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q5_K>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + (u >> 3) * 176;
  const int j = u & 7, shift = 4 * (j & 1);
  const int4* qs = reinterpret_cast<const int4*>(b + 48 + 32 * (j >> 1));
  const int4* qh = reinterpret_cast<const int4*>(b + 16);
  const int4 v0 = qs[0], v1 = qs[1], h0 = qh[0], h1 = qh[1];
  const int vv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
  const int hh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) w.q[i] = ((vv[i] >> shift) & 0x0F0F0F0F) | (((hh[i] >> j) & 0x01010101) << 4);
  kquant_header(b, j, w.d0, w.m0);
  w.d1 = w.d0;
}

template <>
__device__ __forceinline__ void decode_unit<DType::Q6_K>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + (u >> 3) * 210;
  const int j = u & 7, h = j >> 2, qd = j & 3;
  const uint8_t* ql = b + 64 * h + 32 * (qd & 1);
  const uint8_t* qh = b + 128 + 32 * h;
  const int ls = 4 * (qd >> 1), hs = 2 * qd;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int lo = (ld_i32_a2(ql + 4 * i) >> ls) & 0x0F0F0F0F;
    const int hi = (ld_i32_a2(qh + 4 * i) >> hs) & 0x03030303;
    w.q[i] = __vsubss4(lo | (hi << 4), 0x20202020);
  }
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b + 208));
  w.d0 = d * static_cast<float>(sc[8 * h + 2 * qd]);
  w.d1 = d * static_cast<float>(sc[8 * h + 2 * qd + 1]);
}

template <DType T>
__device__ __forceinline__ float unit_dot_a(const WUnit& w, const int* a, float2 ds);

template <DType T>
__device__ __forceinline__ float unit_dot(const WUnit& w, const int8_t* aq, float2 ds) {
  const int4* ap = reinterpret_cast<const int4*>(aq);
  const int4 a0 = ap[0], a1 = ap[1];
  const int a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
  return unit_dot_a<T>(w, a, ds);
}

// The unit's weight quants against the activation quants a[8] (32 int8) of scale/sum ds. The
// float steps are explicit (_rn, one fma) so the compiler cannot contract them differently in the
// kernels for different row counts: a row's result must not depend on N (batch invariance).
template <DType T>
__device__ __forceinline__ float unit_dot_a(const WUnit& w, const int* a, float2 ds) {
  using TR = UnitTraits<T>;
  float r;
  if constexpr (TR::HALF) {
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo = __dp4a(w.q[i], a[i], lo);
      hi = __dp4a(w.q[i + 4], a[i + 4], hi);
    }
    r = __fmul_rn(ds.x, __fmaf_rn(w.d1, static_cast<float>(hi), __fmul_rn(w.d0, static_cast<float>(lo))));
  } else {
    int t = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) t = __dp4a(w.q[i], a[i], t);
    r = __fmul_rn(__fmul_rn(ds.x, w.d0), static_cast<float>(t));
  }
  if constexpr (TR::MIN == 1) r = __fmaf_rn(w.m0, ds.y, r);
  if constexpr (TR::MIN == 2) {
    int slo = 0, shi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      slo = __dp4a(0x01010101, a[i], slo);
      shi = __dp4a(0x01010101, a[i + 4], shi);
    }
    r = __fmaf_rn(ds.x, __fmaf_rn(w.m1, static_cast<float>(shi), __fmul_rn(w.m0, static_cast<float>(slo))), r);
  }
  return r;
}

constexpr int kRowsPerBlock = 4;  // one warp per weight row

template <DType T, int NC>
__global__ void __launch_bounds__(32 * kRowsPerBlock) mmvq_kernel(const uint8_t* w, int64_t w_nb1, int64_t w_nb2,
                                                                   int64_t w_nb3, int64_t M, int U, const int8_t* qs,
                                                                   const float2* ds, int64_t r2, int64_t r3, int64_t B2,
                                                                   float* dst, const float* residual) {
  const int lane = threadIdx.x & 31;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (m >= M) return;
  const int64_t bz = blockIdx.y, i2 = bz % B2, i3 = bz / B2;
  const uint8_t* row = w + m * w_nb1 + (i2 / r2) * w_nb2 + (i3 / r3) * w_nb3;
  const int64_t K = static_cast<int64_t>(U) * 32;
  const int8_t* q0 = qs + bz * NC * K;
  const float2* d0 = ds + bz * NC * U;
  float acc[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) acc[c] = 0.0f;
  // Two units per lane and iteration: both units' weight loads are independent and issue before
  // either is used, doubling the bytes in flight per warp (decode is bound by memory latency).
  int u = lane;
  for (; u + 32 < U; u += 64) {
    WUnit w0, w1;
    decode_unit<T>(row, u, w0);
    decode_unit<T>(row, u + 32, w1);
#pragma unroll
    for (int c = 0; c < NC; ++c)
      acc[c] += unit_dot<T>(w0, q0 + c * K + static_cast<int64_t>(u) * 32, d0[c * U + u]) +
                unit_dot<T>(w1, q0 + c * K + static_cast<int64_t>(u + 32) * 32, d0[c * U + u + 32]);
  }
  if (u < U) {
    WUnit wu;
    decode_unit<T>(row, u, wu);
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[c] += unit_dot<T>(wu, q0 + c * K + static_cast<int64_t>(u) * 32, d0[c * U + u]);
  }
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const float v = warp_sum(acc[c]);
    const int64_t o = (bz * NC + c) * M + m;
    if (lane == 0) dst[o] = residual ? residual[o] + v : v;
  }
}

// One warp per 32-element block: q = round(x / d), d = absmax / 127, s = d * sum(q).
__global__ void quantize_q8_1_kernel(TD b, DType bt, int64_t n_blocks, int8_t* qs, float2* ds) {
  const int lane = threadIdx.x & 31;
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t U = b.ne[0] / 32;
  if (blk >= n_blocks) return;
  const int64_t r = blk / U, k = (blk % U) * 32 + lane;
  int64_t i1, i2, i3;
  split_row(r, b.ne, i1, i2, i3);
  const float x = load_scalar(bt, td_row(b, i1, i2, i3) + k * b.nb[0]);
  const bool finite = __all_sync(0xffffffffu, fabsf(x) <= 3.402823466e38f);
  const float amax = warp_max(fabsf(x));
  const float d = finite ? amax / 127.0f : __int_as_float(0x7fc00000);
  const float id = (finite && d != 0.0f) ? 1.0f / d : 0.0f;
  const int q = finite ? static_cast<int>(roundf(x * id)) : 0;
  qs[r * b.ne[0] + k] = static_cast<int8_t>(q);
  const float sum = warp_sum(static_cast<float>(q));
  if (lane == 0) ds[blk] = make_float2(d, d * sum);
}

// SwiGLU straight into q8_1 planes: h = silu(g) * u per element, then the block quantization of
// quantize_q8_1_kernel. g and u: f32 [n, N] with row strides (the halves of one matmul output).
__global__ void swiglu_q8_1_kernel(TD g, TD u, int64_t n_blocks, int8_t* qs, float2* ds) {
  const int lane = threadIdx.x & 31;
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t U = g.ne[0] / 32;
  if (blk >= n_blocks) return;
  const int64_t r = blk / U, k = (blk % U) * 32 + lane;
  const float gv = *reinterpret_cast<const float*>(g.data + r * g.nb[1] + k * 4);
  const float uv = *reinterpret_cast<const float*>(u.data + r * u.nb[1] + k * 4);
  const float x = gv / (1.0f + expf(-gv)) * uv;
  const bool finite = __all_sync(0xffffffffu, fabsf(x) <= 3.402823466e38f);
  const float amax = warp_max(fabsf(x));
  const float d = finite ? amax / 127.0f : __int_as_float(0x7fc00000);
  const float id = (finite && d != 0.0f) ? 1.0f / d : 0.0f;
  const int q = finite ? static_cast<int>(roundf(x * id)) : 0;
  qs[r * g.ne[0] + k] = static_cast<int8_t>(q);
  const float sum = warp_sum(static_cast<float>(q));
  if (lane == 0) ds[blk] = make_float2(d, d * sum);
}

__global__ void swiglu_f32_kernel(TD g, TD u, float* h) {
  const int64_t r = blockIdx.x, n = g.ne[0];
  const float* gr = reinterpret_cast<const float*>(g.data + r * g.nb[1]);
  const float* ur = reinterpret_cast<const float*>(u.data + r * u.nb[1]);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) h[r * n + k] = gr[k] / (1.0f + expf(-gr[k])) * ur[k];
}

// MUL_MAT_ID (k_moe.cu): one (token, slot) pair per blockIdx.y. The weight is the slice of the
// expert the pair selected (its id read on the device, so captured graphs replay for any routing)
// and the activation its q8_1 row; the arithmetic is mmvq_kernel<T, 1>'s, expression for
// expression, so a pair gets the bits the decode mul_mat gives that expert slice and row.
template <DType T>
__global__ void __launch_bounds__(32 * kRowsPerBlock) mmvq_id_kernel(const uint8_t* w, int64_t w_nb1, int64_t w_nb2,
                                                                      int64_t n_expert, int64_t M, int U,
                                                                      const int8_t* qs, const float2* ds, TD ids,
                                                                      int64_t n_act, int64_t slot0, float* dst,
                                                                      ErrorSink sink) {
  const int lane = threadIdx.x & 31;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (m >= M) return;
  const int64_t s = slot0 + blockIdx.y, k = ids.ne[0], j = s % k, t = s / k;
  const int32_t e = *reinterpret_cast<const int32_t*>(ids.data + j * ids.nb[0] + t * ids.nb[1]);
  if (e < 0 || e >= n_expert) {
    if (m == 0 && lane == 0) report_error(sink, kErrMulMatIdId, e, n_expert);
    if (lane == 0) dst[s * M + m] = __int_as_float(0x7fc00000);
    return;
  }
  const uint8_t* row = w + m * w_nb1 + static_cast<int64_t>(e) * w_nb2;
  const int64_t K = static_cast<int64_t>(U) * 32;
  const int8_t* q0 = qs + (j % n_act + n_act * t) * K;
  const float2* d0 = ds + (j % n_act + n_act * t) * U;
  float acc = 0.0f;
  int u = lane;
  for (; u + 32 < U; u += 64) {
    WUnit w0, w1;
    decode_unit<T>(row, u, w0);
    decode_unit<T>(row, u + 32, w1);
    acc += unit_dot<T>(w0, q0 + static_cast<int64_t>(u) * 32, d0[u]) +
           unit_dot<T>(w1, q0 + static_cast<int64_t>(u + 32) * 32, d0[u + 32]);
  }
  if (u < U) {
    WUnit wu;
    decode_unit<T>(row, u, wu);
    acc += unit_dot<T>(wu, q0 + static_cast<int64_t>(u) * 32, d0[u]);
  }
  const float v = warp_sum(acc);
  if (lane == 0) dst[s * M + m] = v;
}

template <DType T>
void launch_mmvq_id_t(KernelContext& kc, const Tensor& as, const Tensor& ids, const int8_t* qs, const float2* ds,
                      int64_t n_act, float* dst) {
  const int64_t M = as.ne[1], slots = ids.ne[0] * ids.ne[1];
  const int U = static_cast<int>(as.ne[0] / 32);
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t s0 = 0; s0 < slots; s0 += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>(ceil_div(M, kRowsPerBlock)), static_cast<unsigned>(std::min(kMaxGridY, slots - s0)));
    mmvq_id_kernel<T><<<grid, 32 * kRowsPerBlock, 0, kc.stream>>>(
        static_cast<const uint8_t*>(as.data), static_cast<int64_t>(as.nb[1]), static_cast<int64_t>(as.nb[2]), as.ne[2],
        M, U, qs, ds, td(ids), n_act, s0, dst, kc.sink());
    kc.check_launch("mmvq_id_kernel");
  }
}

template <DType T>
void launch_mmvq_t(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2,
                   int64_t B3, float* dst, const float* residual) {
  const int64_t M = a.ne[1];
  const int U = static_cast<int>(a.ne[0] / 32);
  const dim3 grid(static_cast<unsigned>(ceil_div(M, kRowsPerBlock)), static_cast<unsigned>(B2 * B3));
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
  const auto* w = static_cast<const uint8_t*>(a.data);
  const int64_t nb1 = static_cast<int64_t>(a.nb[1]), nb2 = static_cast<int64_t>(a.nb[2]),
                nb3 = static_cast<int64_t>(a.nb[3]);
  switch (N) {
#define MINFER_NC(n)                                                                                       \
  case n:                                                                                                  \
    mmvq_kernel<T, n><<<grid, 32 * kRowsPerBlock, 0, kc.stream>>>(w, nb1, nb2, nb3, M, U, qs, ds, r2, r3, B2, dst, residual); \
    break;
    MINFER_NC(1) MINFER_NC(2) MINFER_NC(3) MINFER_NC(4) MINFER_NC(5) MINFER_NC(6) MINFER_NC(7) MINFER_NC(8)
    MINFER_NC(9) MINFER_NC(10) MINFER_NC(11) MINFER_NC(12) MINFER_NC(13) MINFER_NC(14) MINFER_NC(15) MINFER_NC(16)
#undef MINFER_NC
    default: throw std::logic_error(kc.where() + ": mmvq with N > kMatvecMaxRows");
  }
  kc.check_launch("mmvq_kernel");
}

}  // namespace

bool mmvq_supported(DType type) {
  switch (type) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default: return false;
  }
}

void quantize_q8_1(KernelContext& kc, const TD& b, DType btype, int8_t* qs, float2* ds) {
  const int64_t n_blocks = b.ne[0] / 32 * b.ne[1] * b.ne[2] * b.ne[3];
  if (n_blocks == 0) return;
  quantize_q8_1_kernel<<<static_cast<unsigned>(ceil_div(n_blocks, 8)), 256, 0, kc.stream>>>(b, btype, n_blocks, qs, ds);
  kc.check_launch("quantize_q8_1_kernel");
}

void swiglu_q8_1(KernelContext& kc, const TD& g, const TD& u, int8_t* qs, float2* ds) {
  const int64_t n_blocks = g.ne[0] / 32 * g.ne[1];
  if (n_blocks == 0) return;
  swiglu_q8_1_kernel<<<static_cast<unsigned>(ceil_div(n_blocks, 8)), 256, 0, kc.stream>>>(g, u, n_blocks, qs, ds);
  kc.check_launch("swiglu_q8_1_kernel");
}

void swiglu_f32(KernelContext& kc, const TD& g, const TD& u, float* h) {
  if (g.ne[1] == 0) return;
  swiglu_f32_kernel<<<static_cast<unsigned>(g.ne[1]), row_threads(g.ne[0]), 0, kc.stream>>>(g, u, h);
  kc.check_launch("swiglu_f32_kernel");
}

void mmvq_id(KernelContext& kc, const Tensor& as, const Tensor& ids, const int8_t* qs, const float2* ds, int64_t n_act,
             float* dst) {
  if (ids.ne[0] * ids.ne[1] == 0 || as.ne[1] == 0) return;
  switch (as.type) {
#define MINFER_T(T) \
  case DType::T: return launch_mmvq_id_t<DType::T>(kc, as, ids, qs, ds, n_act, dst);
    MINFER_T(Q4_0) MINFER_T(Q4_1) MINFER_T(Q5_0) MINFER_T(Q5_1) MINFER_T(Q8_0)
    MINFER_T(Q2_K) MINFER_T(Q3_K) MINFER_T(Q4_K) MINFER_T(Q5_K) MINFER_T(Q6_K)
#undef MINFER_T
    default: throw OpError(kc.where() + ": no MMVQ kernel for " + std::string(dtype_name(as.type)));
  }
}

int64_t q8_decode_rows(DType type) {
  return mmq_supported(type) ? kDecodeMaxRows : mmvq_supported(type) ? kMatvecMaxRows : 0;
}

void mmvq(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
          float* dst, const float* residual, float* part) {
  if (mmq_supported(a.type) && N > kMmvqRows) return mmq(kc, a, qs, ds, N, B2, B3, dst, residual, part);
  switch (a.type) {
#define MINFER_T(T) \
  case DType::T: return launch_mmvq_t<DType::T>(kc, a, qs, ds, N, B2, B3, dst, residual);
    MINFER_T(Q4_0) MINFER_T(Q4_1) MINFER_T(Q5_0) MINFER_T(Q5_1) MINFER_T(Q8_0)
    MINFER_T(Q2_K) MINFER_T(Q3_K) MINFER_T(Q4_K) MINFER_T(Q5_K) MINFER_T(Q6_K)
#undef MINFER_T
    default: throw OpError(kc.where() + ": no MMVQ kernel for " + std::string(dtype_name(a.type)));
  }
}

}  // namespace minfer::cuda
