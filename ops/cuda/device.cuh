// Internal to ops/cuda: device helpers shared by the kernel files (loads, reductions, errors).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/common.h"
#include "tensor/fp16.h"

namespace minfer::cuda {

__device__ __forceinline__ void report_error(ErrorSink s, int32_t code, int64_t value, int64_t limit) {
  if (atomicCAS(&s.rec->code, 0, code) == 0) {
    s.rec->node = s.node;
    s.rec->value = value;
    s.rec->limit = limit;
    __threadfence_system();
  }
}

/// Row (i1, i2, i3) of a descriptor.
__device__ __forceinline__ char* td_row(const TD& t, int64_t i1, int64_t i2, int64_t i3) {
  return t.data + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

/// Splits a flat row index into (i1, i2, i3) for shape ne.
__device__ __forceinline__ void split_row(int64_t r, const int64_t* ne, int64_t& i1, int64_t& i2, int64_t& i3) {
  i1 = r % ne[1];
  const int64_t q = r / ne[1];
  i2 = q % ne[2];
  i3 = q / ne[2];
}

/// f32 value of element at byte address p of a F32/F16/BF16/I32 tensor.
__device__ __forceinline__ float load_scalar(DType type, const char* p) {
  switch (type) {
    case DType::F32: return *reinterpret_cast<const float*>(p);
    case DType::F16: return __half2float(*reinterpret_cast<const __half*>(p));
    case DType::BF16: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
    case DType::I32: return static_cast<float>(*reinterpret_cast<const int32_t*>(p));
    default: return __int_as_float(0x7fc00000);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// One q8_1 block (32 values, one per lane of a full warp): q = round(x / d) with d = max|x| / 127,
/// stored at q[lane], and (d, d * sum(q)) at *ds by lane 0. A block with a non-finite value gets
/// d = NaN and zero quants, so the NaN reaches the matmul's output. The one spelling of the
/// activation quantization for the decode matmuls' q8_1 planes (quantize_q8_1, swiglu_q8_1,
/// rms_norm_q8_1); the GGUF block encoders (f16 scales) are quant_device.cuh's.
__device__ __forceinline__ void warp_quantize_q8_1(float x, int lane, int8_t* q, float2* ds) {
  const bool finite = __all_sync(0xffffffffu, fabsf(x) <= 3.402823466e38f);
  const float amax = warp_max(fabsf(x));
  const float d = finite ? amax / 127.0f : __int_as_float(0x7fc00000);
  const float id = (finite && d != 0.0f) ? 1.0f / d : 0.0f;
  const int v = finite ? static_cast<int>(roundf(x * id)) : 0;
  q[lane] = static_cast<int8_t>(v);
  const float sum = warp_sum(static_cast<float>(v));
  if (lane == 0) *ds = make_float2(d, d * sum);
}

/// Block-wide sum for blockDim.x a multiple of 32 (<= 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* smem32) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) smem32[warp] = v;
  __syncthreads();
  v = lane < nw ? smem32[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* smem32) {
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) smem32[warp] = v;
  __syncthreads();
  v = lane < nw ? smem32[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace minfer::cuda
