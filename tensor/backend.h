// Backend interface: memory and compute on one device.
//
// A backend hands out Buffers (host or device memory), moves bytes in and out of tensors, says
// which nodes it can compute, and computes a graph whose tensors all have storage. Kernels are
// looked up per op in the backend's table (ops/cpu/kernels.h, ops/cuda/kernels.cuh).
// How to add a backend: docs/architecture.md.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "tensor/graph.h"
#include "tensor/tensor.h"

namespace minfer {

class Collective;

class Backend;
class Context;

/// A block of backend memory. Tensors point into it; it outlives them.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* base() const = 0;
  virtual size_t size() const = 0;
  virtual Backend& backend() const = 0;
  /// Fills every byte with `value` (used to poison arenas in tests).
  virtual void fill(uint8_t value) = 0;
};

/// Thrown when a backend cannot get memory; the message names the size and the device.
class OutOfMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  /// True when tensor data is directly addressable by the host (the CPU backend).
  virtual bool is_host() const = 0;
  /// Alignment of tensor data inside this backend's buffers.
  virtual size_t alignment() const { return 64; }

  /// Allocates `bytes` (at least one byte is reserved for 0). Throws OutOfMemoryError.
  virtual std::unique_ptr<Buffer> alloc_buffer(size_t bytes) = 0;

  /// A buffer over caller-owned host memory that this backend computes on in place (a mapped
  /// GGUF: weights are used where they lie), or nullptr when it cannot (a device backend; the
  /// caller then copies into alloc_buffer() memory). The memory must outlive the buffer.
  virtual std::unique_ptr<Buffer> wrap_host_memory(void* base, size_t size) {
    (void)base;
    (void)size;
    return nullptr;
  }

  /// Host memory of `bytes` that get_tensor() copies into at full speed, for results read back
  /// every step (logits): the CUDA backend returns pinned memory, which its DMA writes directly
  /// instead of through a staging copy; the default is ordinary heap memory (64-byte aligned).
  /// Freed when the last owner drops it. Throws OutOfMemoryError.
  virtual std::shared_ptr<void> alloc_host(size_t bytes);

  /// Copies `n` bytes from host `src` into `t` at byte `offset` of its storage span. `t` must be
  /// contiguous in the copied range (the caller's job); throws std::out_of_range past nbytes().
  virtual void set_tensor(Tensor& t, const void* src, size_t offset, size_t n) = 0;
  virtual void get_tensor(const Tensor& t, void* dst, size_t offset, size_t n) = 0;

  /// True when this backend has a kernel for `node` (op, dtypes, layout).
  virtual bool supports_op(const Tensor& node) const = 0;

  /// The one place fusion happens: before allocation, replaces patterns of basic ops in `g` by
  /// the backend's fused ops (tensor/op.h), recording new nodes in `ctx` (which owns g's nodes)
  /// and rebuilding g's order. Consumers outside the pattern see the same values. Must be
  /// idempotent (an already rewritten graph is left as it is). Default: no rewrite.
  virtual void rewrite(Context& ctx, Graph& g) const {
    (void)ctx;
    (void)g;
  }

  /// Bytes of kernel workspace `node` needs while it computes (0: none). The graph allocator
  /// plans it in the arena like a tensor alive at that node only and sets node.work.
  virtual size_t workspace_bytes(const Tensor& node) const {
    (void)node;
    return 0;
  }

  /// The most rows (tokens) one forward may hold for which every kernel this backend picks gives
  /// each row the same bits as a forward of that row alone; larger batches agree up to rounding.
  /// Speculative decoding verifies at most this many rows to keep greedy output identical to
  /// plain decoding. Default: unbounded (the CPU backend's kernels work row by row).
  virtual int64_t batch_invariant_rows() const { return std::numeric_limits<int64_t>::max(); }

  /// Makes this backend rank `rank` of tensor-parallel `group` (tensor/collective.h): its
  /// ALL_REDUCE nodes then sum over the group's ranks (alone, ALL_REDUCE copies). Throws
  /// std::invalid_argument for a rank outside the group or a backend without collectives.
  virtual void join(std::shared_ptr<Collective> group, int rank);

  /// Evaluates every node of `g` in order. All tensors must have data. Throws OpError naming the
  /// node when a kernel is missing or rejects its operands.
  virtual void compute(Graph& g) = 0;

  /// Waits until all queued work is done (no-op on the CPU).
  virtual void synchronize() {}
};

/// Assigns storage to every leaf (op NONE) of `ctx` that has none and is not a view (weights, test
/// inputs), packed into one new buffer of `backend`; views of leaves are pointed into their source
/// (views of nodes are placed with the node by the graph allocator). Returns nullptr when nothing
/// needed storage.
std::unique_ptr<Buffer> allocate_tensors(class Context& ctx, Backend& backend);

/// Points `t` (not a view) at `base + offset` of `buffer` and every view of it is resolved later
/// by resolve_view(). Throws std::out_of_range when it does not fit.
void bind_tensor(Tensor& t, Buffer& buffer, size_t offset);

/// Sets a view's data from its source's (view_src data + view_offs).
void resolve_view(Tensor& t);

/// Convenience: copies a whole contiguous host array into `t` (bytes must equal t.nbytes()).
void upload(Backend& b, Tensor& t, const void* src, size_t bytes);
/// Convenience: copies a whole contiguous tensor to host memory.
void download(Backend& b, const Tensor& t, void* dst, size_t bytes);

}  // namespace minfer
