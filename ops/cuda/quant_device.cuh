// Internal to ops/cuda: device-side decoding of the GGUF block formats (tensor/quants_blocks.h)
// element by element, with the CPU decoders' f32 arithmetic (tensor/quants/*.cpp: the scale
// product first, then the quant, then the offset). Used by GET_ROWS, CPY, the f16 dequantization
// for the prefill GEMM and the q8_0 KV cache. Multiply-adds use the _rn intrinsics so nvcc cannot
// contract them into FMAs: the results are bit-identical to the CPU's.
#pragma once

#include "ops/cuda/device.cuh"
#include "tensor/quants_blocks.h"

namespace minfer::cuda {

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/// 32-bit loads from block data: `ld_i32_a2` for 2-byte-aligned blocks (two 16-bit loads),
/// `ld_i32_a4` for 4-byte-aligned ones.
__device__ __forceinline__ int ld_i32_a2(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<int>(static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16));
}
__device__ __forceinline__ int ld_i32_a4(const uint8_t* p) { return *reinterpret_cast<const int*>(p); }

/// Bits b0..b3 of x placed at bit 4 of bytes 0..3 (the fifth bit of Q5 quants).
__device__ __forceinline__ int spread4_bit4(uint32_t x) {
  return static_cast<int>(((x << 4) & 0x10u) | ((x << 11) & 0x1000u) | ((x << 18) & 0x100000u) |
                          ((x << 25) & 0x10000000u));
}

__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

/// The 6-bit Q3_K scale `is` (still biased by +32).
__device__ __forceinline__ int q3k_scale(const uint8_t* s, int is) {
  const int lo = is < 8 ? (s[is] & 0xF) : (s[is - 8] >> 4);
  const int hi = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
  return lo | (hi << 4);
}

/// Element e (0..block_size-1) of one block of `type` at `blk`.
template <DType T>
__device__ __forceinline__ float block_elem(const char* blk, int e);

template <>
__device__ __forceinline__ float block_elem<DType::Q4_0>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
  const int q = (b->qs[e & 15] >> (4 * (e >> 4))) & 0xF;
  return static_cast<float>(q - 8) * h2f(b->d);
}
template <>
__device__ __forceinline__ float block_elem<DType::Q4_1>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
  const int q = (b->qs[e & 15] >> (4 * (e >> 4))) & 0xF;
  return __fadd_rn(__fmul_rn(static_cast<float>(q), h2f(b->d)), h2f(b->m));
}
template <>
__device__ __forceinline__ float block_elem<DType::Q5_0>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ5_0*>(blk);
  const int h = (b->qh[e >> 3] >> (e & 7)) & 1;
  const int q = ((b->qs[e & 15] >> (4 * (e >> 4))) & 0xF) | (h << 4);
  return static_cast<float>(q - 16) * h2f(b->d);
}
template <>
__device__ __forceinline__ float block_elem<DType::Q5_1>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ5_1*>(blk);
  const int h = (b->qh[e >> 3] >> (e & 7)) & 1;
  const int q = ((b->qs[e & 15] >> (4 * (e >> 4))) & 0xF) | (h << 4);
  return __fadd_rn(__fmul_rn(static_cast<float>(q), h2f(b->d)), h2f(b->m));
}
template <>
__device__ __forceinline__ float block_elem<DType::Q8_0>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
  return static_cast<float>(b->qs[e]) * h2f(b->d);
}
template <>
__device__ __forceinline__ float block_elem<DType::Q8_1>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ8_1*>(blk);
  return static_cast<float>(b->qs[e]) * h2f(b->d);
}
template <>
__device__ __forceinline__ float block_elem<DType::Q2_K>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
  const int sc = b->scales[e >> 4];
  const int q = (b->qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e & 127) >> 5))) & 3;
  const float dl = h2f(b->d) * static_cast<float>(sc & 0xF);
  const float ml = h2f(b->dmin) * static_cast<float>(sc >> 4);
  return __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
}
template <>
__device__ __forceinline__ float block_elem<DType::Q3_K>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
  const float dl = h2f(b->d) * static_cast<float>(q3k_scale(b->scales, e >> 4) - 32);
  const int q2 = (b->qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e & 127) >> 5))) & 3;
  const int hb = (b->hmask[e & 31] >> (e >> 5)) & 1;
  return dl * static_cast<float>(q2 - (hb ? 0 : 4));
}
template <>
__device__ __forceinline__ float block_elem<DType::Q4_K>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
  int sc, m;
  scale_min_k4(e >> 5, b->scales, sc, m);
  const int q = (b->qs[32 * (e >> 6) + (e & 31)] >> (4 * ((e >> 5) & 1))) & 0xF;
  const float d1 = h2f(b->d) * static_cast<float>(sc), m1 = h2f(b->dmin) * static_cast<float>(m);
  return __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
}
template <>
__device__ __forceinline__ float block_elem<DType::Q5_K>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ5_K*>(blk);
  int sc, m;
  scale_min_k4(e >> 5, b->scales, sc, m);
  const int q = ((b->qs[32 * (e >> 6) + (e & 31)] >> (4 * ((e >> 5) & 1))) & 0xF) |
                (((b->qh[e & 31] >> (e >> 5)) & 1) << 4);
  const float d1 = h2f(b->d) * static_cast<float>(sc), m1 = h2f(b->dmin) * static_cast<float>(m);
  return __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
}
template <>
__device__ __forceinline__ float block_elem<DType::Q6_K>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
  const int h = e >> 7, l2 = e & 127, qd = l2 >> 5, l = l2 & 31;
  const int nib = (b->ql[64 * h + l + 32 * (qd & 1)] >> (4 * (qd >> 1))) & 0xF;
  const int hi = (b->qh[32 * h + l] >> (2 * qd)) & 3;
  const int q = (nib | (hi << 4)) - 32;
  const int sc = b->scales[8 * h + (l >> 4) + 2 * qd];
  return h2f(b->d) * static_cast<float>(sc) * static_cast<float>(q);
}
template <>
__device__ __forceinline__ float block_elem<DType::Q8_K>(const char* blk, int e) {
  const auto* b = reinterpret_cast<const BlockQ8_K*>(blk);
  return b->d * static_cast<float>(b->qs[e]);
}

/// Element i0 of a row of any supported dtype (scalar types use the element stride nb0; block
/// types need contiguous rows). Unknown types give NaN.
__device__ __forceinline__ float load_elem(DType type, const char* row, int64_t i0, int64_t nb0) {
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::I32: return load_scalar(type, row + i0 * nb0);
#define MINFER_BLOCK_CASE(T, BS, SZ) \
  case DType::T: return block_elem<DType::T>(row + (i0 / (BS)) * (SZ), static_cast<int>(i0 % (BS)));
    MINFER_BLOCK_CASE(Q4_0, 32, 18)
    MINFER_BLOCK_CASE(Q4_1, 32, 20)
    MINFER_BLOCK_CASE(Q5_0, 32, 22)
    MINFER_BLOCK_CASE(Q5_1, 32, 24)
    MINFER_BLOCK_CASE(Q8_0, 32, 34)
    MINFER_BLOCK_CASE(Q8_1, 32, 36)
    MINFER_BLOCK_CASE(Q2_K, 256, 84)
    MINFER_BLOCK_CASE(Q3_K, 256, 110)
    MINFER_BLOCK_CASE(Q4_K, 256, 144)
    MINFER_BLOCK_CASE(Q5_K, 256, 176)
    MINFER_BLOCK_CASE(Q6_K, 256, 210)
    MINFER_BLOCK_CASE(Q8_K, 256, 292)
#undef MINFER_BLOCK_CASE
    default: return __int_as_float(0x7fc00000);
  }
}

/// True for the dtypes load_elem decodes.
inline bool device_decodable(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::I32:
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::Q8_1:
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::Q8_K:
      return true;
    default: return false;
  }
}

/// Quantizes the 32 values held one per lane of a warp into a Q8_0 block, as the CPU's
/// quantize_row_activations does (absmax / 127, f16 scale, roundf, NaN scale for non-finite
/// blocks). Lane 0 writes d; every lane writes its quant.
__device__ __forceinline__ void warp_quantize_q8_0(float x, BlockQ8_0* out, int lane) {
  const bool finite = fabsf(x) <= 3.402823466e38f;
  const bool all_finite = __all_sync(0xffffffffu, finite);
  const float amax = warp_max(fabsf(x));
  if (!all_finite) {
    if (lane == 0) out->d = 0x7E00;
    out->qs[lane] = 0;
    return;
  }
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  if (lane == 0) out->d = __half_as_ushort(__float2half_rn(d));
  out->qs[lane] = static_cast<int8_t>(roundf(x * id));
}

}  // namespace minfer::cuda
