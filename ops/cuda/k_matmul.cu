// MUL_MAT: out[n][m] = sum_k a[m][k] * b[n][k] (+ batch broadcast of a over b's dims 2, 3).
//
// Dispatch (by weight dtype and N = activation rows per batch):
// - block-quantized weights, N <= 16: MMVQ (k_mmvq.cu; q8_1 activations, dp4a).
// - float weights (F32/F16/BF16), N <= 16: a warp-per-row matvec in f32, activations in f32 (the
//   CPU semantics: float weights are widened exactly and multiplied in f32).
// - otherwise cuBLAS on tensor cores:
//     F32 weights: SGEMM (CUBLAS_COMPUTE_32F, no TF32).
//     F16 / BF16 weights: the activations are split x = hi + lo into two f16 (bf16) halves and two
//       GEMMs accumulate in f32, so the product keeps ~22 (16) bits of each activation, close to
//       the CPU's f32 result at tensor-core speed.
//     block-quantized weights: the weight is dequantized to a transient f16 scratch (in row chunks)
//       and multiplied with f16 activations (more precise than the q8 activations of MMVQ/CPU).
#include <algorithm>
#include <cstdlib>

#include "ops/cuda/kernels.cuh"
#include "ops/cuda/quant_device.cuh"

namespace minfer::cuda {
namespace {


// ---------------------------------------------------------------- float matvec (N <= 16)

template <typename W>
__device__ __forceinline__ float wload(const W* p);
template <>
__device__ __forceinline__ float wload<float>(const float* p) { return *p; }
template <>
__device__ __forceinline__ float wload<__half>(const __half* p) { return __half2float(*p); }
template <>
__device__ __forceinline__ float wload<__nv_bfloat16>(const __nv_bfloat16* p) { return __bfloat162float(*p); }

// Eight consecutive weights as f32 from a 16-byte (f16/bf16) or 32-byte (f32) aligned address.
template <typename W>
__device__ __forceinline__ void wload8(const W* p, float* o);
template <>
__device__ __forceinline__ void wload8<float>(const float* p, float* o) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
}
template <>
__device__ __forceinline__ void wload8<__half>(const __half* p, float* o) {
  const int4 v = *reinterpret_cast<const int4*>(p);
  const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    o[2 * i] = f.x;
    o[2 * i + 1] = f.y;
  }
}
template <>
__device__ __forceinline__ void wload8<__nv_bfloat16>(const __nv_bfloat16* p, float* o) {
  const int4 v = *reinterpret_cast<const int4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    o[2 * i] = f.x;
    o[2 * i + 1] = f.y;
  }
}

// x: contiguous f32 activations [B3][B2][NC][K]. One warp per weight row. The K loop is unrolled
// so several iterations' loads are in flight (a router row of 2,048 is 8 iterations: one chain of
// dependent loads each was the kernel's time); the sums keep their order.
template <typename W, int NC, bool VEC>
__global__ void __launch_bounds__(128) matvec_f_kernel(const char* w, int64_t w_nb1, int64_t w_nb2, int64_t w_nb3,
                                                        int64_t M, int64_t K, const float* x, int64_t r2, int64_t r3,
                                                        int64_t B2, float* dst, const float* residual) {
  const int lane = threadIdx.x & 31;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);
  if (m >= M) return;
  const int64_t bz = blockIdx.y, i2 = bz % B2, i3 = bz / B2;
  const W* row = reinterpret_cast<const W*>(w + m * w_nb1 + (i2 / r2) * w_nb2 + (i3 / r3) * w_nb3);
  const float* xb = x + bz * NC * K;
  float acc[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) acc[c] = 0.0f;
  if (VEC) {
#pragma unroll 4
    for (int64_t k = lane * 8; k < K; k += 256) {
      float wv[8];
      wload8<W>(row + k, wv);
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const float4* xp = reinterpret_cast<const float4*>(xb + c * K + k);
        const float4 x0 = xp[0], x1 = xp[1];
        acc[c] += wv[0] * x0.x + wv[1] * x0.y + wv[2] * x0.z + wv[3] * x0.w + wv[4] * x1.x + wv[5] * x1.y +
                  wv[6] * x1.z + wv[7] * x1.w;
      }
    }
  } else {
    for (int64_t k = lane; k < K; k += 32) {
      const float wv = wload<W>(row + k);
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[c] += wv * xb[c * K + k];
    }
  }
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const float v = warp_sum(acc[c]);
    const int64_t o = (bz * NC + c) * M + m;
    if (lane == 0) dst[o] = residual ? residual[o] + v : v;
  }
}

template <typename W, bool VEC>
void launch_matvec_f(KernelContext& kc, const Tensor& a, const float* x, int64_t N, int64_t B2, int64_t B3,
                     float* dst, const float* residual) {
  const int64_t M = a.ne[1], K = a.ne[0];
  const dim3 grid(static_cast<unsigned>(ceil_div(M, 4)), static_cast<unsigned>(B2 * B3));
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
  const char* w = static_cast<const char*>(a.data);
  const auto nb1 = static_cast<int64_t>(a.nb[1]), nb2 = static_cast<int64_t>(a.nb[2]),
             nb3 = static_cast<int64_t>(a.nb[3]);
  switch (N) {
#define MINFER_NC(n)                                                                                               \
  case n:                                                                                                          \
    matvec_f_kernel<W, n, VEC><<<grid, 128, 0, kc.stream>>>(w, nb1, nb2, nb3, M, K, x, r2, r3, B2, dst, residual); \
    break;
    MINFER_NC(1) MINFER_NC(2) MINFER_NC(3) MINFER_NC(4) MINFER_NC(5) MINFER_NC(6) MINFER_NC(7) MINFER_NC(8)
    MINFER_NC(9) MINFER_NC(10) MINFER_NC(11) MINFER_NC(12) MINFER_NC(13) MINFER_NC(14) MINFER_NC(15) MINFER_NC(16)
#undef MINFER_NC
    default: throw std::logic_error(kc.where() + ": matvec with N > kMatvecMaxRows");
  }
  kc.check_launch("matvec_f_kernel");
}

// ---------------------------------------------------------------- activation conversion

enum class ActMode { F32, F16, F16_HILO, BF16_HILO };

// b [K, N, B2, B3] (any strides, f32/f16) -> contiguous rows of K. HILO writes hi then lo planes
// (each rows*K elements): hi = round(x), lo = round(x - hi).
template <ActMode MODE>
__global__ void convert_act_kernel(TD b, DType bt, void* out, int64_t plane) {
  int64_t i1, i2, i3;
  split_row(blockIdx.x, b.ne, i1, i2, i3);
  const char* rb = td_row(b, i1, i2, i3);
  const int64_t K = b.ne[0], o = static_cast<int64_t>(blockIdx.x) * K;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
    const float x = load_scalar(bt, rb + k * b.nb[0]);
    if constexpr (MODE == ActMode::F32) {
      static_cast<float*>(out)[o + k] = x;
    } else if constexpr (MODE == ActMode::F16) {
      static_cast<__half*>(out)[o + k] = __float2half_rn(x);
    } else if constexpr (MODE == ActMode::F16_HILO) {
      const __half hi = __float2half_rn(x);
      static_cast<__half*>(out)[o + k] = hi;
      static_cast<__half*>(out)[plane + o + k] = __float2half_rn(x - __half2float(hi));
    } else {
      const __nv_bfloat16 hi = __float2bfloat16_rn(x);
      static_cast<__nv_bfloat16*>(out)[o + k] = hi;
      static_cast<__nv_bfloat16*>(out)[plane + o + k] = __float2bfloat16_rn(x - __bfloat162float(hi));
    }
  }
}

template <ActMode MODE>
void convert_act(KernelContext& kc, const Tensor& b, void* out, int64_t plane) {
  const int64_t rows = b.nrows();
  if (rows == 0) return;
  convert_act_kernel<MODE><<<static_cast<unsigned>(rows), row_threads(b.ne[0]), 0, kc.stream>>>(td(b), b.type, out,
                                                                                               plane);
  kc.check_launch("convert_act_kernel");
}

// ---------------------------------------------------------------- dequantize to f16

template <DType T>
__global__ void dequant_f16_kernel(const char* w, int64_t nb1, int64_t K, __half* out) {
  constexpr int BS = T == DType::Q2_K || T == DType::Q3_K || T == DType::Q4_K || T == DType::Q5_K ||
                             T == DType::Q6_K
                         ? 256
                         : 32;
  constexpr int SZ = T == DType::Q4_0   ? 18
                     : T == DType::Q4_1 ? 20
                     : T == DType::Q5_0 ? 22
                     : T == DType::Q5_1 ? 24
                     : T == DType::Q8_0 ? 34
                     : T == DType::Q8_1 ? 36
                     : T == DType::Q2_K ? 84
                     : T == DType::Q3_K ? 110
                     : T == DType::Q4_K ? 144
                     : T == DType::Q5_K ? 176
                                        : 210;
  // Eight consecutive elements per thread (one 16-byte store); K is a multiple of 32.
  const char* row = w + static_cast<int64_t>(blockIdx.x) * nb1;
  int4* o = reinterpret_cast<int4*>(out + static_cast<int64_t>(blockIdx.x) * K);
  const int k8 = static_cast<int>(K / 8);
  for (int i = threadIdx.x; i < k8; i += blockDim.x) {
    const int k = 8 * i;
    const char* blk = row + (k / BS) * SZ;
    const int e = k % BS;
    __half2 h[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      h[j] = __floats2half2_rn(block_elem<T>(blk, e + 2 * j), block_elem<T>(blk, e + 2 * j + 1));
    o[i] = *reinterpret_cast<const int4*>(h);
  }
}

void dequant_f16(KernelContext& kc, DType t, const char* w, int64_t nb1, int64_t rows, int64_t K, __half* out) {
  const unsigned g = static_cast<unsigned>(rows);
  const int nt = row_threads(K / 8, 256);
  switch (t) {
#define MINFER_T(T) \
  case DType::T: dequant_f16_kernel<DType::T><<<g, nt, 0, kc.stream>>>(w, nb1, K, out); break;
    MINFER_T(Q4_0) MINFER_T(Q4_1) MINFER_T(Q5_0) MINFER_T(Q5_1) MINFER_T(Q8_0) MINFER_T(Q8_1)
    MINFER_T(Q2_K) MINFER_T(Q3_K) MINFER_T(Q4_K) MINFER_T(Q5_K) MINFER_T(Q6_K)
#undef MINFER_T
    default: throw OpError(kc.where() + ": cannot dequantize " + std::string(dtype_name(t)));
  }
  kc.check_launch("dequant_f16_kernel");
}

// Rows of the weight dequantized per GEMM: all of them when they fit the chunk, else a multiple
// of 128 so every chunk's output column starts 16-byte aligned (cuBLAS picks slow align1 kernels
// for misaligned C).
int64_t gemm_chunk_rows(const KernelContext& kc, int64_t M, int64_t K) {
  const int64_t fit = std::max<int64_t>(kc.options->gemm_dequant_chunk, 1) / K;
  if (fit >= M) return M;
  return std::max<int64_t>(128, fit / 128 * 128);
}

bool is_block_weight(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::Q8_1:
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default: return false;
  }
}


// C[M, N] (column-major, ldc = M) = A^T B with A [K, rows] (lda) and B [K, N] (ldb = K).
void gemm(KernelContext& kc, int64_t M, int64_t N, int64_t K, const void* A, cudaDataType_t at, int64_t lda,
          const void* B, cudaDataType_t bt, float beta, float* C, int64_t ldc) {
  const float alpha = 1.0f;
  MINFER_CUBLAS_CHECK(cublasGemmEx(kc.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(M), static_cast<int>(N),
                                   static_cast<int>(K), &alpha, A, at, static_cast<int>(lda), B, bt,
                                   static_cast<int>(K), &beta, C, CUDA_R_32F, static_cast<int>(ldc),
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      kc.where());
}

void matmul_gemm(KernelContext& kc, const Tensor& a, const Tensor& b, Tensor& dst) {
  kc.used_gemm = true;
  const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1], B2 = b.ne[2], B3 = b.ne[3];
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
  const int64_t rows = N * B2 * B3, plane = rows * K;
  const bool block = is_block_weight(a.type);
  ActMode mode;
  size_t act_bytes;
  cudaDataType_t ct;
  switch (a.type) {
    case DType::F32: mode = ActMode::F32; act_bytes = plane * 4; ct = CUDA_R_32F; break;
    case DType::F16: mode = ActMode::F16_HILO; act_bytes = plane * 4; ct = CUDA_R_16F; break;
    case DType::BF16: mode = ActMode::BF16_HILO; act_bytes = plane * 4; ct = CUDA_R_16BF; break;
    default: mode = ActMode::F16; act_bytes = plane * 2; ct = CUDA_R_16F; break;
  }
  const int64_t chunk_rows = block ? gemm_chunk_rows(kc, M, K) : 0;
  const size_t w_bytes = block ? static_cast<size_t>(chunk_rows * K) * 2 : 0;
  char* scratch = static_cast<char*>(kc.scratch_bytes(align256(act_bytes) + w_bytes + 256));
  void* act = scratch;
  __half* w16 = reinterpret_cast<__half*>(scratch + align256(act_bytes));
  switch (mode) {
    case ActMode::F32: convert_act<ActMode::F32>(kc, b, act, plane); break;
    case ActMode::F16: convert_act<ActMode::F16>(kc, b, act, plane); break;
    case ActMode::F16_HILO: convert_act<ActMode::F16_HILO>(kc, b, act, plane); break;
    case ActMode::BF16_HILO: convert_act<ActMode::BF16_HILO>(kc, b, act, plane); break;
  }
  const size_t es = mode == ActMode::F32 ? 4 : 2;
  for (int64_t i3 = 0; i3 < B3; ++i3)
    for (int64_t i2 = 0; i2 < B2; ++i2) {
      const char* abase = static_cast<const char*>(a.data) + (i2 / r2) * a.nb[2] + (i3 / r3) * a.nb[3];
      const char* bact = static_cast<const char*>(act) + static_cast<size_t>((i3 * B2 + i2) * N * K) * es;
      float* c = static_cast<float*>(dst.data) + (i3 * B2 + i2) * N * M;
      if (block) {
        for (int64_t m0 = 0; m0 < M; m0 += chunk_rows) {
          const int64_t mc = std::min(chunk_rows, M - m0);
          dequant_f16(kc, a.type, abase + m0 * static_cast<int64_t>(a.nb[1]), static_cast<int64_t>(a.nb[1]), mc, K,
                      w16);
          gemm(kc, mc, N, K, w16, CUDA_R_16F, K, bact, CUDA_R_16F, 0.0f, c + m0, M);
        }
        continue;
      }
      const int64_t lda = static_cast<int64_t>(a.nb[1] / dtype_type_size(a.type));
      gemm(kc, M, N, K, abase, ct, lda, bact, ct, 0.0f, c, M);
      if (mode == ActMode::F16_HILO || mode == ActMode::BF16_HILO)
        gemm(kc, M, N, K, abase, ct, lda, bact + static_cast<size_t>(plane) * es, ct, 1.0f, c, M);
    }
}

}  // namespace

bool s_mul_mat(const Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  if (b.type != DType::F32 && b.type != DType::F16) return false;
  if (a.type != DType::F32 && a.type != DType::F16 && a.type != DType::BF16 && !is_block_weight(a.type)) return false;
  if (a.nb[0] != dtype_type_size(a.type)) return false;
  if (a.nb[1] % dtype_type_size(a.type) != 0) return false;
  return true;
}

// The q8_1 planes of the decode matmul, then MMQ's K-split partial sums.
size_t q8_plane_bytes(int64_t rows, int64_t K) {
  return align256(static_cast<size_t>(rows * K)) + align256(static_cast<size_t>(rows * (K / 32)) * sizeof(float2));
}

size_t matmul_scratch(const KernelContext& kc, const Tensor& a, const Tensor& b) {
  const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1];
  const int64_t rows = N * b.ne[2] * b.ne[3];
  if (N <= q8_decode_rows(a.type)) return q8_plane_bytes(rows, K) + mmq_scratch(kc, a, N, b.ne[2] * b.ne[3]);
  if (N <= kMatvecMaxRows && (a.type == DType::F32 || a.type == DType::F16 || a.type == DType::BF16))
    return static_cast<size_t>(rows * K) * 4;
  const size_t act_bytes = static_cast<size_t>(rows * K) * (a.type == DType::F32 || a.type == DType::F16 || a.type == DType::BF16 ? 4 : 2);
  const bool block = is_block_weight(a.type);
  const int64_t chunk_rows = block ? gemm_chunk_rows(kc, M, K) : 0;
  return align256(act_bytes) + (block ? static_cast<size_t>(chunk_rows * K) * 2 : 0) + 256;
}

bool matmul_is_mmvq(const Tensor& a, int64_t n_cols) { return n_cols <= q8_decode_rows(a.type); }
bool matmul_is_vec(const Tensor& a, int64_t n_cols) {
  return matmul_is_mmvq(a, n_cols) ||
         (n_cols <= kMatvecMaxRows && (a.type == DType::F32 || a.type == DType::F16 || a.type == DType::BF16));
}

Q8PlanesView activation_planes(KernelContext& kc, const Tensor& b) {
  if (kc.prequant_src == &b) return {kc.prequant_qs, kc.prequant_ds};
  const int64_t K = b.ne[0], rows = b.ne[1] * b.ne[2] * b.ne[3];
  const Q8Planes p = q8_planes(kc.scratch_bytes(q8_plane_bytes(rows, K)), rows, K);
  quantize_q8_1(kc, td(b), b.type, p.qs, p.ds);
  return {p.qs, p.ds};
}

namespace {

// The q8_1 decode path of matmul(): x's planes, then mmvq() with its partial sums after them in
// the workspace; returns the partial sums' slices when `reduce` is false.
MatmulSlices matmul_q8(KernelContext& kc, const Tensor& a, const Tensor& b, float* out, bool reduce) {
  const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1], B2 = b.ne[2], B3 = b.ne[3];
  const size_t planes = kc.prequant_src == &b ? 0 : q8_plane_bytes(N * B2 * B3, K);
  const size_t part_bytes = mmq_scratch(kc, a, N, B2 * B3);
  char* s = static_cast<char*>(kc.scratch_bytes(planes + part_bytes));
  const Q8PlanesView x = activation_planes(kc, b);
  float* part = part_bytes ? reinterpret_cast<float*>(s + planes) : nullptr;
  const int splits = mmvq(kc, a, x.qs, x.ds, N, B2, B3, out, kc.residual, part, reduce);
  return splits == 1 ? MatmulSlices{out, 1, 0} : MatmulSlices{part, splits, N * B2 * B3 * M};
}

}  // namespace

MatmulSlices matmul_partial(KernelContext& kc, const Tensor& a, const Tensor& b, Tensor& dst) {
  if (kc.residual || kc.residual_out) throw std::logic_error(kc.where() + ": matmul_partial with a residual");
  const int64_t M = a.ne[1], N = b.ne[1], B2 = b.ne[2], B3 = b.ne[3];
  if (M > 0 && N > 0 && B2 > 0 && B3 > 0 && N <= q8_decode_rows(a.type))
    return matmul_q8(kc, a, b, static_cast<float*>(dst.data), false);
  matmul(kc, a, b, dst);
  return {static_cast<const float*>(dst.data), 1, 0};
}

void matmul(KernelContext& kc, const Tensor& a, const Tensor& b, Tensor& dst) {
  const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1], B2 = b.ne[2], B3 = b.ne[3];
  if (M == 0 || N == 0 || B2 == 0 || B3 == 0) return;
  float* out = kc.residual_out ? kc.residual_out : static_cast<float*>(dst.data);
  const float* res = kc.residual;
  if (N <= q8_decode_rows(a.type)) {
    matmul_q8(kc, a, b, out, true);
    return;
  }
  if (N <= kMatvecMaxRows && (a.type == DType::F32 || a.type == DType::F16 || a.type == DType::BF16)) {
    const int64_t rows = N * B2 * B3;
    // Contiguous f32 activations are read in place; others are converted into the workspace.
    const float* x = static_cast<const float*>(b.data);
    if (b.type != DType::F32 || !b.is_contiguous() || reinterpret_cast<uintptr_t>(b.data) % 16 != 0) {
      float* xc = static_cast<float*>(kc.scratch_bytes(static_cast<size_t>(rows * K) * 4));
      convert_act<ActMode::F32>(kc, b, xc, 0);
      x = xc;
    }
    const size_t es = dtype_type_size(a.type);
    const bool vec = K % 8 == 0 && a.nb[1] % (8 * es) == 0 && a.nb[2] % (8 * es) == 0 && a.nb[3] % (8 * es) == 0 &&
                     reinterpret_cast<uintptr_t>(a.data) % 32 == 0;
    switch (a.type) {
      case DType::F32:
        vec ? launch_matvec_f<float, true>(kc, a, x, N, B2, B3, out, res)
            : launch_matvec_f<float, false>(kc, a, x, N, B2, B3, out, res);
        break;
      case DType::F16:
        vec ? launch_matvec_f<__half, true>(kc, a, x, N, B2, B3, out, res)
            : launch_matvec_f<__half, false>(kc, a, x, N, B2, B3, out, res);
        break;
      default:
        vec ? launch_matvec_f<__nv_bfloat16, true>(kc, a, x, N, B2, B3, out, res)
            : launch_matvec_f<__nv_bfloat16, false>(kc, a, x, N, B2, B3, out, res);
        break;
    }
    return;
  }
  if (kc.residual_out) throw std::logic_error(kc.where() + ": residual fusion on a GEMM matmul");
  matmul_gemm(kc, a, b, dst);
}

void k_mul_mat(KernelContext& kc, Tensor& dst) { matmul(kc, *dst.src[0], *dst.src[1], dst); }

size_t w_mul_mat(const KernelContext& kc, const Tensor& dst) { return matmul_scratch(kc, *dst.src[0], *dst.src[1]); }

// MUL_MAT_ADD (a fused op, made by rewrite.cpp for the decode matmuls): the matrix-vector
// epilogue adds the residual src[2].
bool s_mul_mat_add(const Tensor& dst) {
  const Tensor* r = dst.src[2];
  if (!s_mul_mat(dst) || !r || r->type != DType::F32 || !r->is_contiguous() || !same_shape(*r, dst)) return false;
  return dst.is_contiguous() && matmul_is_vec(*dst.src[0], dst.src[1]->ne[1]);
}

void k_mul_mat_add(KernelContext& kc, Tensor& dst) {
  kc.residual = static_cast<const float*>(dst.src[2]->data);
  kc.residual_out = static_cast<float*>(dst.data);
  matmul(kc, *dst.src[0], *dst.src[1], dst);
  kc.residual = nullptr;
  kc.residual_out = nullptr;
}

}  // namespace minfer::cuda
