// The CUDA backend: device memory, one stream, a per-op kernel table, CUDA-graph replay.
//
// - Memory: every Buffer is one cudaMalloc; weights are uploaded once with set_tensor and stay
//   resident. A failed allocation throws OutOfMemoryError naming the bytes, the device and its
//   free memory.
// - Compute: nodes run in graph order on one stream; each op dispatches through the kernel table
//   (ops/cuda/kernels.cuh) by op, then by dtype and shape inside the kernel file. Nothing is read
//   back to the host during compute: positions, token ids and KV lengths are read by the kernels
//   from device memory, so a captured graph replays correctly with new input values.
// - Bad runtime values (a token id outside the table, a position outside the KV cache) are
//   recorded by the kernel in a device error word; synchronize() and get_tensor() throw OpError
//   naming the op, the value and the node.
// - CUDA graphs: compute() keys the graph by everything its kernels would be launched with: every
//   node's and source's op, dtype, shape, strides, params and data pointer (an exact key, finer
//   than Graph::structure_hash() plus pointers). The first time a key is seen the graph runs
//   eagerly; the second time the stream is captured into a CUDA graph, which is then launched for
//   this and every later call with the same key. Graphs that ran cuBLAS GEMMs (prefill) are not
//   captured. Inputs are set with set_tensor() before compute(), outside the captured region.
//   MINFER_CUDA_GRAPH=0 in the environment turns capture off.
// - Peephole fusions at decode sizes (RMS_NORM -> q8_1 for the next fused op; MUL_MAT/FFN + ADD
//   residual epilogue); MINFER_CUDA_FUSED=0 turns them and the fused QKV/FFN kernels off.
// - Readback: get_tensor() copies through a pinned staging buffer and synchronizes.
//
// Design and kernel table: docs/cuda.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/backend.h"

namespace minfer {

namespace cuda {

/// Number of usable CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();

/// True when the CUDA kernel table has a kernel for `node` (op, dtypes, layout); what
/// CudaBackend::supports_op answers. Needs no device.
bool op_supported(const Tensor& node);

struct BackendImpl;

}  // namespace cuda

class CudaBackend final : public Backend {
 public:
  /// Uses device `device` (0-based). Throws std::runtime_error when the device does not exist or
  /// cannot be initialized (the message gives the CUDA error).
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override;
  bool is_host() const override { return false; }
  size_t alignment() const override { return 256; }

  /// cudaMalloc of `bytes`; throws OutOfMemoryError("cuda:N (<gpu>): cannot allocate ...").
  std::unique_ptr<Buffer> alloc_buffer(size_t bytes) override;
  /// Host -> device copy on the backend stream (the host memory may be reused on return).
  void set_tensor(Tensor& t, const void* src, size_t offset, size_t n) override;
  /// Device -> host through pinned staging; waits for all queued work and reports kernel errors.
  void get_tensor(const Tensor& t, void* dst, size_t offset, size_t n) override;
  bool supports_op(const Tensor& node) const override;
  /// Queues every node of `g` (or replays its captured CUDA graph). Asynchronous.
  void compute(Graph& g) override;
  /// Waits for the stream; throws OpError for a bad value a kernel reported (see above).
  void synchronize() override;

  int device() const;
  /// Turns CUDA-graph capture on or off (default: on unless MINFER_CUDA_GRAPH=0).
  void set_graphs_enabled(bool on);
  bool graphs_enabled() const;

  /// Counters for tests and benchmarks.
  struct Stats {
    uint64_t computes = 0;       ///< compute() calls
    uint64_t graph_captures = 0; ///< CUDA graphs captured
    uint64_t graph_replays = 0;  ///< compute() calls served by a captured graph
    uint64_t kernel_nodes = 0;   ///< nodes dispatched eagerly (not replayed)
    size_t scratch_bytes = 0;    ///< size of the per-node scratch buffer
  };
  Stats stats() const;

 private:
  std::unique_ptr<cuda::BackendImpl> impl_;
};

}  // namespace minfer
