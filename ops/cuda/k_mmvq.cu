// MMVQ: the dp4a decode matmul for block-quantized weights that the tensor-core MMQ (k_mmq.cu)
// lacks (N <= kMatvecMaxRows = 16 activation rows); mmvq() is the one entry point of both.
//
// Activations are quantized once per matmul to q8_1 planes (int8 quants [rows][K] and per
// 32-element block float2 (d, d * sum(q))). A warp computes one weight row, or RPW rows from two
// activation rows on (rows_per_warp); its lanes walk the rows in one of two layouts:
// - units (every type but Q6_K): lane l takes the 32-element units l, l + 32, ...; a unit's weight
//   quants are unpacked into eight 32-bit words of int8 lanes and dotted with the activation
//   quants by __dp4a, then scaled:
//     unit = d_a * (d0 * dot(q[0..15]) + d1 * dot(q[16..31])) + min terms,
//   where d0/d1 are the weight's (sub-)block scales and the min terms use the activation sums;
// - slices (Q6_K): lane l takes super-block (l >> 3) of a group of four and 32 weights of it whose
//   quants are three 8-byte pieces (ql low/high, qh), so a warp's loads cover the group's 840
//   contiguous bytes once (docs/perf/2026-12-03-decode-matmul.md: 1.3-1.4x the unit layout).
// Blocks that are only 2-byte aligned (Q4_0, Q5_0, Q8_0, Q3_K, Q6_K) are read as aligned 32-bit
// words and funnel-shifted into place instead of through pairs of 16-bit loads.
// (ggml's MMVQ design, llama.cpp ggml-cuda/mmvq.cu and vecdotq.cuh; this is an independent
// implementation over the block layouts of tensor/quants_blocks.h.)
#include <algorithm>

#include "ops/cuda/kernels.cuh"
#include "ops/cuda/quant_device.cuh"

namespace minfer::cuda {
namespace {

// NW 32-bit words of block data at a 2-byte-aligned address: NW + 1 aligned loads (the last only
// when p is not 4-byte aligned) and funnel shifts. The aligned word holding p's last bytes may
// extend 2 bytes past them; an aligned word never crosses a page, so this cannot fault.
template <int NW>
__device__ __forceinline__ void ld_words_a2(const uint8_t* p, int (&out)[NW]) {
  const auto* a = reinterpret_cast<const uint32_t*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{3});
  const unsigned sh = static_cast<unsigned>(reinterpret_cast<uintptr_t>(p) & 3) * 8;
  uint32_t w[NW + 1];
#pragma unroll
  for (int i = 0; i < NW; ++i) w[i] = __ldg(a + i);
  w[NW] = sh ? __ldg(a + NW) : 0u;
#pragma unroll
  for (int i = 0; i < NW; ++i) out[i] = static_cast<int>(__funnelshift_r(w[i], w[i + 1], sh));
}

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

template <DType T>
__device__ __forceinline__ void decode_unit(const uint8_t* row, int u, WUnit& w);

template <>
__device__ __forceinline__ void decode_unit<DType::Q4_0>(const uint8_t* row, int u, WUnit& w) {
  const uint8_t* b = row + u * 18;
  const float d = h2f(*reinterpret_cast<const uint16_t*>(b));
  int v[4];
  ld_words_a2(b + 2, v);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    w.q[j] = v[j] & 0x0F0F0F0F;
    w.q[j + 4] = (v[j] >> 4) & 0x0F0F0F0F;
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
  int v[5];  // qh, then the 16 quant bytes
  ld_words_a2(b + 2, v);
  const uint32_t qh = static_cast<uint32_t>(v[0]);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    w.q[j] = (v[j + 1] & 0x0F0F0F0F) | spread4_bit4(qh >> (4 * j));
    w.q[j + 4] = ((v[j + 1] >> 4) & 0x0F0F0F0F) | spread4_bit4(qh >> (16 + 4 * j));
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
  ld_words_a2(b + 2, w.q);
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
  int ql[8], hm[8];
  ld_words_a2(qs, ql);
  ld_words_a2(b, hm);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int q2 = (ql[i] >> shift) & 0x03030303;
    const int hb = (hm[i] >> j) & 0x01010101;
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

// Q6_K slices. Slice p (0..7) of a super-block: half h = p >> 2 and l in [8j, 8j + 8) for
// j = p & 3: the 8-byte pieces ql[64h + l], ql[64h + 32 + l] and qh[32h + l] hold elements
// 128h + 32k + l (k = 0..3, ggml's dequantize_row_q6_K) with scales sc[8h + (j >> 1) + 2k].
struct Q6Slice {
  int l0[2], l1[2], h[2], sc[2];
  uint16_t d;
};

__device__ __forceinline__ void q6k_slice_load(const uint8_t* blk, int p, Q6Slice& r) {
  const int h = p >> 2, j = p & 3;
  ld_words_a2(blk + 64 * h + 8 * j, r.l0);
  ld_words_a2(blk + 64 * h + 32 + 8 * j, r.l1);
  ld_words_a2(blk + 128 + 32 * h + 8 * j, r.h);
  ld_words_a2(blk + 192 + 8 * h, r.sc);
  r.d = __ldg(reinterpret_cast<const unsigned short*>(blk + 208));
}

// The slice's 32 weights against activation block `qb` (256 quants) and its eight (d, s) pairs:
// d * (sum over k of d_a[4h + k] * sc_k * dot_k), each dot over 8 elements, in a fixed order.
__device__ __forceinline__ float q6k_slice_dot(const Q6Slice& r, int p, const int8_t* qb, const float2* db) {
  const int h = p >> 2, j = p & 3;
  const int8_t* a = qb + 128 * h + 8 * j;
  int2 x[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) x[k] = *reinterpret_cast<const int2*>(a + 32 * k);
  const float4 da = *reinterpret_cast<const float4*>(db + 4 * h), db2 = *reinterpret_cast<const float4*>(db + 4 * h + 2);
  auto q6 = [](int lo, int hi) {
    return static_cast<int>(__vsubss4((lo & 0x0F0F0F0F) | ((hi & 0x03030303) << 4), 0x20202020));
  };
  const int d0 = __dp4a(q6(r.l0[1], r.h[1]), x[0].y, __dp4a(q6(r.l0[0], r.h[0]), x[0].x, 0));
  const int d1 = __dp4a(q6(r.l1[1], r.h[1] >> 2), x[1].y, __dp4a(q6(r.l1[0], r.h[0] >> 2), x[1].x, 0));
  const int d2 = __dp4a(q6(r.l0[1] >> 4, r.h[1] >> 4), x[2].y, __dp4a(q6(r.l0[0] >> 4, r.h[0] >> 4), x[2].x, 0));
  const int d3 = __dp4a(q6(r.l1[1] >> 4, r.h[1] >> 6), x[3].y, __dp4a(q6(r.l1[0] >> 4, r.h[0] >> 6), x[3].x, 0));
  const int s = 8 * (j >> 1);
  const float d = h2f(r.d);
  const float s0 = static_cast<float>(static_cast<int8_t>(r.sc[0] >> s));
  const float s1 = static_cast<float>(static_cast<int8_t>(r.sc[0] >> (16 + s)));
  const float s2 = static_cast<float>(static_cast<int8_t>(r.sc[1] >> s));
  const float s3 = static_cast<float>(static_cast<int8_t>(r.sc[1] >> (16 + s)));
  float v = __fmul_rn(__fmul_rn(da.x, __fmul_rn(d, s0)), static_cast<float>(d0));
  v = __fmaf_rn(__fmul_rn(da.z, __fmul_rn(d, s1)), static_cast<float>(d1), v);
  v = __fmaf_rn(__fmul_rn(db2.x, __fmul_rn(d, s2)), static_cast<float>(d2), v);
  return __fmaf_rn(__fmul_rn(db2.z, __fmul_rn(d, s3)), static_cast<float>(d3), v);
}

template <DType T>
__device__ __forceinline__ float unit_dot_a(const WUnit& w, const int* a, float2 ds);

// One unit's 32 activation quants as eight words (two 16-byte loads).
__device__ __forceinline__ void load_act(const int8_t* aq, int (&a)[8]) {
  const int4* ap = reinterpret_cast<const int4*>(aq);
  const int4 a0 = ap[0], a1 = ap[1];
  a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w;
  a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
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

constexpr int kWarpsPerBlock = 4;

// Weight rows per warp: each activation load then serves RPW weight rows. The unit layout takes
// two at two activation rows and four from three on; Q6_K's slices two or four from two on
// (measured 1.7x at four rows on the 7B LM head). Whole 7B Q4_K_M on an H100
// (docs/perf/2026-12-06-mmvq-rows.md): S_TG at B = 4 +18 %, at B = 8 +13 %; at B = 2 one row per
// warp in this loop measured 2.5 % slower than two.
constexpr int rows_per_warp(DType t, int nc) {
  if (nc <= 1 || nc > kMmvqRows) return 1;
  if (t == DType::Q6_K) return nc <= 3 ? 2 : 4;
  return nc == 2 ? 2 : 4;
}

// This lane's partial dots of RPW weight rows with NC q8_1 activation rows (q0/d0: [NC][K] quants,
// [NC][K/32] scales); a row's result is warp_sum of them. What a (weight row, activation row)
// pair computes depends on neither NC nor RPW: the decode kernels are batch-invariant.
template <DType T, int NC, int RPW>
__device__ __forceinline__ void lane_dots(const uint8_t* const (&rows)[RPW], int U, const int8_t* q0,
                                          const float2* d0, int lane, float (&acc)[RPW][NC]) {
  const int64_t K = static_cast<int64_t>(U) * 32;
#pragma unroll
  for (int i = 0; i < RPW; ++i)
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[i][c] = 0.0f;
  if constexpr (T == DType::Q6_K) {
    const int nblk = U / 8, p = lane & 7;
    for (int b = lane >> 3; b < nblk; b += 4) {
      Q6Slice r[RPW];
#pragma unroll
      for (int i = 0; i < RPW; ++i) q6k_slice_load(rows[i] + static_cast<int64_t>(b) * 210, p, r[i]);
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int8_t* qb = q0 + c * K + static_cast<int64_t>(b) * 256;
        const float2* db = d0 + c * U + b * 8;
#pragma unroll
        for (int i = 0; i < RPW; ++i) acc[i][c] += q6k_slice_dot(r[i], p, qb, db);
      }
    }
  } else {
    // Two units per lane and iteration and row: all weight loads issue before any is used (decode
    // is bound by memory latency), and each unit's activation quants are loaded once for the RPW
    // rows. A (row, activation row) pair sums exactly as at RPW = 1: the same bits at any N.
    int u = lane;
    for (; u + 32 < U; u += 64) {
      WUnit w0[RPW], w1[RPW];
#pragma unroll
      for (int i = 0; i < RPW; ++i) {
        decode_unit<T>(rows[i], u, w0[i]);
        decode_unit<T>(rows[i], u + 32, w1[i]);
      }
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        int a0[8], a1[8];
        load_act(q0 + c * K + static_cast<int64_t>(u) * 32, a0);
        load_act(q0 + c * K + static_cast<int64_t>(u + 32) * 32, a1);
        const float2 s0 = d0[c * U + u], s1 = d0[c * U + u + 32];
#pragma unroll
        for (int i = 0; i < RPW; ++i) acc[i][c] += unit_dot_a<T>(w0[i], a0, s0) + unit_dot_a<T>(w1[i], a1, s1);
      }
    }
    if (u < U) {
      WUnit wu[RPW];
#pragma unroll
      for (int i = 0; i < RPW; ++i) decode_unit<T>(rows[i], u, wu[i]);
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        int a0[8];
        load_act(q0 + c * K + static_cast<int64_t>(u) * 32, a0);
        const float2 s0 = d0[c * U + u];
#pragma unroll
        for (int i = 0; i < RPW; ++i) acc[i][c] += unit_dot_a<T>(wu[i], a0, s0);
      }
    }
  }
}

template <DType T, int NC>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) mmvq_kernel(const uint8_t* w, int64_t w_nb1, int64_t w_nb2,
                                                                   int64_t w_nb3, int64_t M, int U, const int8_t* qs,
                                                                   const float2* ds, int64_t r2, int64_t r3, int64_t B2,
                                                                   float* dst, const float* residual) {
  constexpr int RPW = rows_per_warp(T, NC);
  const int lane = threadIdx.x & 31;
  const int64_t m0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5)) * RPW;
  if (m0 >= M) return;
  const int64_t bz = blockIdx.y, i2 = bz % B2, i3 = bz / B2;
  const uint8_t* rows[RPW];
#pragma unroll
  for (int i = 0; i < RPW; ++i)
    rows[i] = w + min(m0 + i, M - 1) * w_nb1 + (i2 / r2) * w_nb2 + (i3 / r3) * w_nb3;
  const int64_t K = static_cast<int64_t>(U) * 32;
  float acc[RPW][NC];
  lane_dots<T, NC, RPW>(rows, U, qs + bz * NC * K, ds + bz * NC * U, lane, acc);
#pragma unroll
  for (int i = 0; i < RPW; ++i)
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const float v = warp_sum(acc[i][c]);
      const int64_t o = (bz * NC + c) * M + m0 + i;
      if (lane == 0 && m0 + i < M) dst[o] = residual ? residual[o] + v : v;
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
  warp_quantize_q8_1(x, lane, qs + r * b.ne[0] + k - lane, ds + blk);
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
  warp_quantize_q8_1(x, lane, qs + r * g.ne[0] + k - lane, ds + blk);
}

__global__ void swiglu_f32_kernel(TD g, TD u, float* h) {
  const int64_t r = blockIdx.x, n = g.ne[0];
  const float* gr = reinterpret_cast<const float*>(g.data + r * g.nb[1]);
  const float* ur = reinterpret_cast<const float*>(u.data + r * u.nb[1]);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) h[r * n + k] = gr[k] / (1.0f + expf(-gr[k])) * ur[k];
}

// MUL_MAT_ID (k_moe.cu): one (token, slot) pair per blockIdx.y. The weight is the slice of the
// expert the pair selected (its id read on the device, so captured graphs replay for any routing)
// and the activation its q8_1 row; the arithmetic is mmvq_kernel<T, 1>'s (both run lane_dots),
// so a pair gets the bits the decode mul_mat gives that expert slice and row. With a second
// weight of the same type and layout (an expert FFN's gate and up), blocks from bx1 on take it
// and write dst2: one launch for both, each result the one its own launch would give.
template <DType T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) mmvq_id_kernel(const uint8_t* w, const uint8_t* w2, int64_t w_nb1,
                                                                      int64_t w_nb2, int64_t n_expert, int64_t M, int U,
                                                                      const int8_t* qs, const float2* ds, TD ids,
                                                                      int64_t n_act, int64_t slot0, int64_t bx1,
                                                                      float* dst, float* dst2, ErrorSink sink) {
  const int lane = threadIdx.x & 31;
  int64_t bx = blockIdx.x;
  if (bx >= bx1) {
    bx -= bx1;
    w = w2;
    dst = dst2;
  }
  const int64_t m = bx * kWarpsPerBlock + (threadIdx.x >> 5);
  if (m >= M) return;
  const int64_t s = slot0 + blockIdx.y, k = ids.ne[0], j = s % k, t = s / k;
  const int32_t e = *reinterpret_cast<const int32_t*>(ids.data + j * ids.nb[0] + t * ids.nb[1]);
  if (e < 0 || e >= n_expert) {
    if (m == 0 && lane == 0) report_error(sink, kErrMulMatIdId, e, n_expert);
    if (lane == 0) dst[s * M + m] = __int_as_float(0x7fc00000);
    return;
  }
  const uint8_t* rows[1] = {w + m * w_nb1 + static_cast<int64_t>(e) * w_nb2};
  const int64_t K = static_cast<int64_t>(U) * 32, a = j % n_act + n_act * t;
  float acc[1][1];
  lane_dots<T, 1, 1>(rows, U, qs + a * K, ds + a * U, lane, acc);
  const float v = warp_sum(acc[0][0]);
  if (lane == 0) dst[s * M + m] = v;
}

// as2/dst2: the optional second weight (null: one weight).
template <DType T>
void launch_mmvq_id_t(KernelContext& kc, const Tensor& as, const Tensor* as2, const Tensor& ids, const int8_t* qs,
                      const float2* ds, int64_t n_act, float* dst, float* dst2) {
  const int64_t M = as.ne[1], slots = ids.ne[0] * ids.ne[1];
  const int U = static_cast<int>(as.ne[0] / 32);
  const int64_t bx1 = ceil_div(M, kWarpsPerBlock);
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t s0 = 0; s0 < slots; s0 += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>(as2 ? 2 * bx1 : bx1), static_cast<unsigned>(std::min(kMaxGridY, slots - s0)));
    mmvq_id_kernel<T><<<grid, 32 * kWarpsPerBlock, 0, kc.stream>>>(
        static_cast<const uint8_t*>(as.data), static_cast<const uint8_t*>(as2 ? as2->data : as.data),
        static_cast<int64_t>(as.nb[1]), static_cast<int64_t>(as.nb[2]), as.ne[2], M, U, qs, ds, td(ids), n_act, s0,
        bx1, dst, dst2, kc.sink());
    kc.check_launch("mmvq_id_kernel");
  }
}

template <DType T, int NC>
void launch_mmvq_nc(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t B2, int64_t B3,
                    float* dst, const float* residual) {
  const int64_t M = a.ne[1];
  const int U = static_cast<int>(a.ne[0] / 32);
  const dim3 grid(static_cast<unsigned>(ceil_div(M, kWarpsPerBlock * rows_per_warp(T, NC))), static_cast<unsigned>(B2 * B3));
  mmvq_kernel<T, NC><<<grid, 32 * kWarpsPerBlock, 0, kc.stream>>>(
      static_cast<const uint8_t*>(a.data), static_cast<int64_t>(a.nb[1]), static_cast<int64_t>(a.nb[2]),
      static_cast<int64_t>(a.nb[3]), M, U, qs, ds, B2 / a.ne[2], B3 / a.ne[3], B2, dst, residual);
}

template <DType T>
void launch_mmvq_t(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2,
                   int64_t B3, float* dst, const float* residual) {
  switch (N) {
#define MINFER_NC(n) \
  case n: launch_mmvq_nc<T, n>(kc, a, qs, ds, B2, B3, dst, residual); break;
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
             float* dst, const Tensor* as2, float* dst2) {
  if (ids.ne[0] * ids.ne[1] == 0 || as.ne[1] == 0) return;
  // One launch for two weights only where their rows are laid out alike.
  if (as2 && !(as2->type == as.type && same_shape(*as2, as) && as2->nb[1] == as.nb[1] && as2->nb[2] == as.nb[2])) {
    mmvq_id(kc, as, ids, qs, ds, n_act, dst);
    return mmvq_id(kc, *as2, ids, qs, ds, n_act, dst2);
  }
  switch (as.type) {
#define MINFER_T(T) \
  case DType::T: return launch_mmvq_id_t<DType::T>(kc, as, as2, ids, qs, ds, n_act, dst, dst2);
    MINFER_T(Q4_0) MINFER_T(Q4_1) MINFER_T(Q5_0) MINFER_T(Q5_1) MINFER_T(Q8_0)
    MINFER_T(Q2_K) MINFER_T(Q3_K) MINFER_T(Q4_K) MINFER_T(Q5_K) MINFER_T(Q6_K)
#undef MINFER_T
    default: throw OpError(kc.where() + ": no MMVQ kernel for " + std::string(dtype_name(as.type)));
  }
}

int64_t q8_decode_rows(DType type) {
  return mmq_supported(type) ? kDecodeMaxRows : mmvq_supported(type) ? kMatvecMaxRows : 0;
}

bool mmvq_runs_mmq(const Tensor& a, int64_t N) {
  return mmq_supported(a.type) && (N > kMmvqRows || mmq_f16_every_row(a));
}

int mmvq(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
         float* dst, const float* residual, float* part, bool reduce) {
  if (mmvq_runs_mmq(a, N)) return mmq(kc, a, qs, ds, N, B2, B3, dst, residual, part, reduce);
  switch (a.type) {
#define MINFER_T(T) \
  case DType::T: launch_mmvq_t<DType::T>(kc, a, qs, ds, N, B2, B3, dst, residual); return 1;
    MINFER_T(Q4_0) MINFER_T(Q4_1) MINFER_T(Q5_0) MINFER_T(Q5_1) MINFER_T(Q8_0)
    MINFER_T(Q2_K) MINFER_T(Q3_K) MINFER_T(Q4_K) MINFER_T(Q5_K) MINFER_T(Q6_K)
#undef MINFER_T
    default: throw OpError(kc.where() + ": no MMVQ kernel for " + std::string(dtype_name(a.type)));
  }
}

}  // namespace minfer::cuda
