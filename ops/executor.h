// Executor: runs graphs on one backend — lowers fused ops the backend lacks, allocates through
// a GraphAllocator (layout reused for equal graphs), computes.
//
//   Context ctx;                         // per step: record the graph
//   Tensor* ids = ctx.new_tensor(DType::I32, {n}); ids->flags |= kTensorInput;
//   Tensor* out = model(ctx, ids, ...);
//   Graph g({out});
//   exec.allocate(ctx, g);               // storage for every node and input
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

  /// Lowers fused nodes the backend has no kernel for (recording their decompositions in `ctx`)
  /// and assigns storage to every node and input of `g`.
  void allocate(Context& ctx, Graph& g);

  /// Measure pass for a worst-case graph: lowers it and reserves arena space for it once.
  void reserve(Context& ctx, Graph& g);

  /// Computes an allocated graph.
  void compute(Graph& g) { backend_.compute(g); }

 private:
  Backend& backend_;
  GraphAllocator galloc_;
};

}  // namespace minfer
