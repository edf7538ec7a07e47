// Internal to ops/cuda: the one way kernels are launched, with programmatic dependent launch.
//
// Programmatic dependent launch (PDL, sm_90 on; CUDA programming guide, "Programmatic Dependent
// Launch and Synchronization"): a kernel launched with the attribute
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the previous kernel on its
// stream is still running, once every block of that kernel has executed
// `griddepcontrol.launch_dependents` (or exited). Its blocks then wait in `griddepcontrol.wait`
// until the previous grid has completed and its memory is visible. So the launch latency and the
// ramp-up of the next kernel overlap the tail of the previous one, which matters for a decode step:
// a chain of ~10 short, latency-bound kernels a layer, each launched only after the last drained.
//
// The contract that makes it safe: every kernel launched through launch() calls pdl_entry() as its
// first statement, before it reads or writes any global memory, so no kernel touches memory that
// the previous one is still reading or writing. Waiting for the previous grid's completion is
// transitive: each kernel completes only after its own wait, so kernel n also sees every kernel
// before n - 1. Launches of other code (cuBLAS, NCCL, memcpy nodes) keep the ordinary stream
// order on both sides. With the attribute off (CudaOptions::pdl, or before sm_90) the wait and the
// trigger are no-ops and the launch is an ordinary one.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "ops/cuda/common.h"

namespace minfer::cuda {

/// First statement of every kernel: waits for the previous kernel on the stream to complete
/// (returns at once when the launch was not programmatic), then lets the next kernel launch.
__device__ __forceinline__ void pdl_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Whether kernels of this context launch programmatically: CudaOptions::pdl on a device of
/// compute capability 9.0 or later, and not while profiling (the per-node events of
/// CudaOptions::profile would sit between the kernels).
inline bool pdl_enabled(const KernelContext& kc) {
  return kc.options && kc.options->pdl && !kc.options->profile && kc.prop && kc.prop->major >= 9;
}

/// kernel<<<grid, block, smem, stream>>>(args...), programmatic when `pdl`; a failed launch
/// throws std::runtime_error "<where()>: launching a kernel failed: <CUDA error>". The kernel must
/// begin with pdl_entry().
template <typename Where, typename... P, typename... A>
void launch_with(cudaStream_t stream, bool pdl, const Where& where, void (*kernel)(P...), dim3 grid, dim3 block,
                 size_t smem, A&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
  if (e != cudaSuccess)
    throw std::runtime_error(where() + ": launching a kernel failed: " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

/// A kernel of the node kc dispatches, on its stream (programmatic per pdl_enabled).
template <typename... P, typename... A>
void launch(const KernelContext& kc, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A&&... args) {
  const auto where = [&] { return kc.where(); };
  launch_with(kc.stream, pdl_enabled(kc), where, kernel, grid, block, smem, std::forward<A>(args)...);
}

}  // namespace minfer::cuda
