// Executor: runs graphs on one backend — the backend rewrites the graph into its fused kernels,
// a GraphAllocator gives every tensor and kernel workspace storage (layout reused for equal
// graphs), the backend computes.
//
//   Context ctx;                         // per step: record the graph
//   Tensor* ids = ctx.new_tensor(DType::I32, {n}); ids->flags |= kTensorInput;
//   Tensor* out = model(ctx, ids, ...);
//   Graph g({out});
//   exec.allocate(ctx, g);               // rewrite, then storage for every node and input
//   backend.set_tensor(*ids, ...);       // fill inputs
//   exec.compute(g);                     // run
#pragma once

#include "tensor/backend.h"
#include "tensor/context.h"
#include "tensor/graph.h"
#include "tensor/graph_alloc.h"

namespace minfer {

class Executor {
 public:
  explicit Executor(Backend& backend) : backend_(backend), galloc_(backend) {}

  Backend& backend() { return backend_; }
  GraphAllocator& allocator() { return galloc_; }

  /// Lets the backend rewrite `g` (Backend::rewrite, new nodes recorded in `ctx`) and assigns
  /// storage to every node, input and kernel workspace of it.
  void allocate(Context& ctx, Graph& g);

  /// Measure pass for a worst-case graph: rewrites it and reserves arena space for it once.
  void reserve(Context& ctx, Graph& g);

  /// Computes an allocated graph.
  void compute(Graph& g) { backend_.compute(g); }

 private:
  Backend& backend_;
  GraphAllocator galloc_;
};

}  // namespace minfer
