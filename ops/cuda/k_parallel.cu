// The tensor-parallel collectives (ops/parallel.h): ALL_REDUCE and ALL_GATHER. Joined to a group
// (CudaBackend::join, kc.group), the exchange is NCCL on the backend's stream, in place on the
// node's device memory, so it is captured into the step's CUDA graph like any kernel; alone, both
// ops are the gathering copy the CPU backend makes. Same results as ops/cpu/k_parallel.cpp.
#include <string>

#include "ops/cuda/device.cuh"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/nccl_collective.h"

namespace minfer::cuda {
namespace {

// One block per row of x: the row's elements (any strides) into contiguous `out`, row after row.
__global__ void gather_rows_kernel(TD x, float* out) {
  int64_t i1, i2, i3;
  split_row(blockIdx.x, x.ne, i1, i2, i3);
  const char* row = td_row(x, i1, i2, i3);
  float* o = out + static_cast<int64_t>(blockIdx.x) * x.ne[0];
  for (int64_t i = threadIdx.x; i < x.ne[0]; i += blockDim.x) o[i] = *reinterpret_cast<const float*>(row + i * x.nb[0]);
}

// NCCL's all-gather layout, rank r's rows [rows][n0] at r * rows * n0, into dst's: row j of dst is
// rank 0's row j, then rank 1's, ... (block j; dst contiguous [n_ranks * n0, rows]).
__global__ void place_gathered_kernel(const float* all, float* dst, int64_t n0, int64_t rows, int n_ranks) {
  const int64_t j = blockIdx.x, w = n0 * n_ranks;
  float* o = dst + j * w;
  for (int64_t i = threadIdx.x; i < w; i += blockDim.x) {
    const int64_t r = i / n0;
    o[i] = all[(r * rows + j) * n0 + i % n0];
  }
}

// x made contiguous at `out` (a device-to-device copy when it already is; nothing when it lies there).
void gather(KernelContext& kc, const Tensor& x, float* out) {
  if (x.nelements() == 0) return;
  if (x.is_contiguous()) {
    if (x.data != out)
      MINFER_CUDA_CHECK(cudaMemcpyAsync(out, x.data, x.nbytes(), cudaMemcpyDeviceToDevice, kc.stream), kc.where());
    return;
  }
  gather_rows_kernel<<<static_cast<unsigned>(x.nrows()), row_threads(x.ne[0]), 0, kc.stream>>>(td(x), out);
  kc.check_launch("gather_rows_kernel");
}

int group_ranks(const KernelContext& kc) { return kc.group ? kc.group->n_ranks() : 1; }

}  // namespace

void k_all_reduce(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  auto* out = static_cast<float*>(dst.data);
  const auto n = static_cast<size_t>(dst.nelements());
  if (!kc.group || n == 0) return gather(kc, x, out);
  // A contiguous source (a matmul's partial sums) is NCCL's send buffer as it is: no copy first.
  const float* send = out;
  if (x.is_contiguous()) send = static_cast<const float*>(x.data);
  else gather(kc, x, out);
  kc.group->queue_all_reduce_sum(kc.rank, send, out, n, kc.stream);
}

bool s_all_gather(const Tensor& dst) {
  // A gather over several ranks needs a group, which needs NCCL; the group's size is checked by
  // CudaBackend::supports_op and the kernel.
  return dst.param<int32_t>(0) == 1 || nccl_available();
}

size_t w_all_gather(const KernelContext&, const Tensor& dst) {
  // One row (decode logits) gathers straight into dst; several need NCCL's layout first.
  const Tensor& x = *dst.src[0];
  const int n_ranks = dst.param<int32_t>(0);
  if (n_ranks == 1 || x.nrows() == 1) return 0;
  return align256(static_cast<size_t>(x.nelements()) * static_cast<size_t>(n_ranks) * sizeof(float));
}

void k_all_gather(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const int n_ranks = dst.param<int32_t>(0);
  if (n_ranks != group_ranks(kc))
    throw OpError("ALL_GATHER: " + describe(dst) + " gathers over " + std::to_string(n_ranks) +
                  " ranks, but the backend's tensor-parallel group has " + std::to_string(group_ranks(kc)));
  auto* out = static_cast<float*>(dst.data);
  const auto n = static_cast<size_t>(x.nelements());
  if (n_ranks == 1 || n == 0) return gather(kc, x, out);
  const int64_t rows = x.nrows();
  // NCCL's layout is the ranks' parts one after another: with one row that is dst's own layout.
  float* all = rows == 1 ? out : static_cast<float*>(kc.scratch_bytes(n * static_cast<size_t>(n_ranks) * sizeof(float)));
  // A contiguous source is sent as it is; a strided one is gathered into this rank's slot first
  // (an in-place all-gather).
  const float* send = static_cast<const float*>(x.data);
  if (!x.is_contiguous()) {
    float* mine = all + static_cast<size_t>(kc.rank) * n;
    gather(kc, x, mine);
    send = mine;
  }
  kc.group->queue_all_gather(kc.rank, send, n, all, kc.stream);
  if (rows == 1) return;
  place_gathered_kernel<<<static_cast<unsigned>(rows), row_threads(x.ne[0] * n_ranks), 0, kc.stream>>>(
      all, out, x.ne[0], rows, n_ranks);
  kc.check_launch("place_gathered_kernel");
}

}  // namespace minfer::cuda
