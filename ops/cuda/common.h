// Internal to ops/cuda: error checks, the kernel context and tensor descriptors (host code; the
// device helpers are in device.cuh).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ops/cuda/cuda_backend.h"
#include "tensor/tensor.h"

namespace minfer::cuda {

class NcclCollective;

/// Throws std::runtime_error "<what>: <call> failed: <cuda error> (<file>:<line>)".
[[noreturn]] void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line, const std::string& what);
[[noreturn]] void throw_cublas_error(cublasStatus_t s, const char* call, const char* file, int line,
                                     const std::string& what);

#define MINFER_CUDA_CHECK(call, what)                                                        \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) ::minfer::cuda::throw_cuda_error(e_, #call, __FILE__, __LINE__, what); \
  } while (0)

#define MINFER_CUBLAS_CHECK(call, what)                                                          \
  do {                                                                                           \
    const cublasStatus_t s_ = (call);                                                            \
    if (s_ != CUBLAS_STATUS_SUCCESS) ::minfer::cuda::throw_cublas_error(s_, #call, __FILE__, __LINE__, what); \
  } while (0)

/// Codes kernels write into the device error record (first error wins).
enum ErrorCode : int32_t {
  kErrNone = 0,
  kErrGetRowsId = 1,       ///< value = id, limit = n_rows
  kErrKvStorePos = 2,      ///< value = cell, limit = cells of the cache
  kErrAttentionPos = 3,    ///< value = position, limit = positions of a block-table row
  kErrSoftMaxPos = 4,      ///< value = position
  kErrAttentionSeq = 5,    ///< value = sequence, limit = block-table rows
  kErrAttentionBlock = 6,  ///< value = block-table entry, limit = blocks of the cache
  kErrMulMatIdId = 7,      ///< value = expert id, limit = n_expert
};

/// The device error record (host-mapped pinned memory): code, node index, value, limit.
struct DeviceError {
  int32_t code;
  int32_t node;
  int64_t value;
  int64_t limit;
};

/// Passed by value to kernels that can detect bad runtime values.
struct ErrorSink {
  DeviceError* rec;
  int32_t node;
};

struct KernelContext {
  cudaStream_t stream;
  cublasHandle_t cublas;
  const cudaDeviceProp* prop;
  const CudaOptions* options;
  DeviceError* err;       ///< device pointer of the error record
  const Tensor* node;     ///< the node being dispatched (for messages)
  int32_t node_index;
  /// The node's workspace (Tensor::work, planned by the graph allocator from the kernel table's
  /// workspace function).
  char* work = nullptr;
  size_t work_bytes = 0;

  // Set by a fused op's kernel from its own sources for the matmuls it calls (k_fused.cu,
  // MUL_MAT_ADD):
  /// Write residual + result into residual_out instead of the matmul's dst.
  const float* residual = nullptr;
  float* residual_out = nullptr;
  /// Activations already quantized to q8_1 planes (RMS_NORM_Q8_1): matmul() uses them instead
  /// of quantizing `prequant_src` again.
  const Tensor* prequant_src = nullptr;
  const int8_t* prequant_qs = nullptr;
  const float2* prequant_ds = nullptr;
  /// Set by kernels that run cuBLAS GEMMs (prefill-sized graphs are not worth capturing).
  bool used_gemm = false;

  ErrorSink sink() const { return {err, node_index}; }
  /// "OP node 'name' [ne...] dtype": names the node in error messages.
  std::string where() const;
  /// Checks the last launch; throws naming `kernel` and the node.
  void check_launch(const char* kernel) const;
  /// `bytes` of the node's workspace starting at scratch_offset (a fused op takes its own part
  /// first, then raises the offset for the kernels it calls). Throws std::logic_error when the
  /// op's workspace function declared less: the allocator planned only what it declared.
  void* scratch_bytes(size_t bytes) const {
    if (scratch_offset + bytes > work_bytes)
      throw std::logic_error(where() + ": the kernel needs " + std::to_string(scratch_offset + bytes) +
                             " bytes of workspace, its op declared " + std::to_string(work_bytes));
    return work + scratch_offset;
  }
  size_t scratch_offset = 0;

  /// The backend's tensor-parallel group and its rank in it (CudaBackend::join), or none: what
  /// the collectives' kernels (k_parallel.cu) exchange through.
  NcclCollective* group = nullptr;
  int rank = 0;
};

/// A tensor as kernels see it: data, shape and byte strides.
struct TD {
  char* data;
  int64_t ne[4];
  int64_t nb[4];
};

inline TD td(const Tensor& t) {
  TD d;
  d.data = static_cast<char*>(t.data);
  for (int i = 0; i < 4; ++i) {
    d.ne[i] = t.ne[i];
    d.nb[i] = static_cast<int64_t>(t.nb[i]);
  }
  return d;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Threads for a row kernel over ne0 elements: a multiple of 32 in [32, cap].
inline int row_threads(int64_t ne0, int cap = 256) {
  int64_t t = ceil_div(ne0, 32) * 32;
  if (t > cap) t = cap;
  if (t < 32) t = 32;
  return static_cast<int>(t);
}

}  // namespace minfer::cuda
