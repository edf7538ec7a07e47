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
// - Fusion: rewrite() turns patterns of basic ops into the fused kernels (ops/cuda/rewrite.cpp:
//   the attention input block into QKV, the SwiGLU MLP into FFN_SWIGLU, decode matmuls + residual
//   into MUL_MAT_ADD, norms feeding MMVQ matmuls into RMS_NORM_Q8_1).
// - Kernel temporaries are node workspaces (workspace_bytes) that the graph allocator plans in
//   the arena: the backend allocates nothing per graph, so captured graphs stay valid.
// - Settings are a CudaOptions given at construction.
// - Readback: get_tensor() copies into alloc_host() memory (pinned) directly, into any other
//   host memory through a pinned staging buffer, and synchronizes.
// - Tensor parallelism: join() makes the backend a rank of an NCCL group of this process's CUDA
//   devices (ops/cuda/nccl_collective.h); its ALL_REDUCE / ALL_GATHER nodes then run NCCL on the
//   backend's stream and are captured with the rest of a decode step. Alone they copy.
//
// Design and kernel table: docs/cuda.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/backend.h"
#include "tensor/context.h"

namespace minfer {

namespace cuda {

/// Number of usable CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();

/// True when the CUDA kernel table has a kernel for `node` (op, dtypes, layout); what
/// CudaBackend::supports_op answers. Needs no device.
bool op_supported(const Tensor& node);

/// What CudaBackend::rewrite does with fusion on (ops/cuda/rewrite.cpp): replaces patterns of
/// basic ops in `g` by the fused ops the kernels implement (QKV, FFN_SWIGLU, MUL_MAT_ADD,
/// RMS_NORM_Q8_1), new nodes recorded in `ctx`. Needs no device.
void rewrite_graph(Context& ctx, Graph& g);

struct BackendImpl;

}  // namespace cuda

/// The CUDA backend's settings (all on by default; the programs' --no-cuda-graphs, --no-fusion and
/// --cuda-profile turn them off or on, examples/common).
struct CudaOptions {
  /// Capture repeated decode-sized graphs as CUDA graphs and replay them.
  bool graphs = true;
  /// rewrite() into the fused kernels; off: every basic op runs its own kernel.
  bool fusion = true;
  /// Host time in compute() and GPU time per graph key, printed to stderr when the backend is
  /// destroyed. With graphs off (--no-cuda-graphs) also GPU time per kernel node (events between
  /// nodes; the launches are queued behind a 50 ms gate so the GPU runs them back to back), summed
  /// by op, dtype, shape and weight name.
  bool profile = false;
  /// Elements of a block-quantized weight dequantized to f16 per cuBLAS GEMM chunk (prefill
  /// matmuls; 256 Mi elements = 512 MiB of workspace at most). Tests lower it to exercise chunking.
  int64_t gemm_dequant_chunk = int64_t{256} << 20;
};

class CudaBackend final : public Backend {
 public:
  /// Uses device `device` (0-based). Throws std::runtime_error when the device does not exist or
  /// cannot be initialized (the message gives the CUDA error).
  explicit CudaBackend(int device, const CudaOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override;
  bool is_host() const override { return false; }
  /// kMmvqRows (8): up to there the decode kernels (MMVQ, float matvec, split-KV attention, the
  /// expert matvec) run; 9..64 rows take the tensor-core MMQ, whose rounding differs.
  int64_t batch_invariant_rows() const override;
  size_t alignment() const override { return 256; }

  /// cudaMalloc of `bytes`; throws OutOfMemoryError("cuda:N (<gpu>): cannot allocate ...").
  std::unique_ptr<Buffer> alloc_buffer(size_t bytes) override;
  /// Host -> device copy on the backend stream (the host memory may be reused on return).
  void set_tensor(Tensor& t, const void* src, size_t offset, size_t n) override;
  /// Device -> host through pinned staging; waits for all queued work and reports kernel errors.
  void get_tensor(const Tensor& t, void* dst, size_t offset, size_t n) override;
  /// Pinned host memory (cudaHostAlloc). Throws OutOfMemoryError.
  std::shared_ptr<void> alloc_host(size_t bytes) override;
  /// The kernel table's answer (cuda::op_supported); an ALL_GATHER only when its rank count is
  /// the size of the backend's group (1 alone).
  bool supports_op(const Tensor& node) const override;
  /// Makes this backend rank `rank` of `group`, which must be a cuda::NcclCollective whose rank
  /// `rank` is this backend's device. Throws std::invalid_argument otherwise (another kind of
  /// group, e.g. a HostCollective: CPU and CUDA ranks cannot be mixed; a build without NCCL; a
  /// rank outside the group; another device). Drops the captured CUDA graphs.
  void join(std::shared_ptr<Collective> group, int rank) override;
  /// The fusions above (when options().fusion).
  void rewrite(Context& ctx, Graph& g) const override;
  /// The kernel table's workspace function for the node's op (split-KV partials, q8_1
  /// activation planes, dequantized GEMM chunks, fused-op intermediates).
  size_t workspace_bytes(const Tensor& node) const override;
  /// Queues every node of `g` (or replays its captured CUDA graph). Asynchronous.
  void compute(Graph& g) override;
  /// Waits for the stream; throws OpError for a bad value a kernel reported (see above). Joined to
  /// a group, it polls, and throws std::runtime_error once another rank has aborted the group.
  void synchronize() override;

  int device() const;
  const CudaOptions& options() const;
  /// Turns CUDA-graph capture on or off after construction (CudaOptions::graphs).
  void set_graphs_enabled(bool on);
  bool graphs_enabled() const;

  /// Counters for tests and benchmarks.
  struct Stats {
    uint64_t computes = 0;       ///< compute() calls
    uint64_t graph_captures = 0; ///< CUDA graphs captured
    uint64_t graph_replays = 0;  ///< compute() calls served by a captured graph
    uint64_t kernel_nodes = 0;   ///< nodes dispatched eagerly (not replayed)
  };
  Stats stats() const;

 private:
  std::unique_ptr<cuda::BackendImpl> impl_;
};

}  // namespace minfer
