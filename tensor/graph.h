// Graph: the nodes needed to compute a set of output tensors, in topological order.
//
// Life cycle (docs/architecture.md): build (op builders record nodes in a Context) -> Graph
// (topological order from the outputs) -> allocate (GraphAllocator assigns arena offsets) ->
// compute (Backend::compute) -> reuse (an equal graph next step hits the allocator's layout
// cache and, on CUDA, a captured CUDA graph).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tensor/tensor.h"

namespace minfer {

class Graph {
 public:
  Graph() = default;
  /// Builds the graph of everything `outputs` depend on. Outputs get kTensorOutput.
  explicit Graph(std::initializer_list<Tensor*> outputs);

  /// Adds `t` and its ancestors (depth-first, sources before users, each node once) and marks it
  /// as an output.
  void add_output(Tensor* t);

  /// Forgets the order and rebuilds it from the outputs (after a graph rewrite).
  void rebuild();

  /// Nodes to evaluate in order (op != NONE, views included: they cost nothing).
  const std::vector<Tensor*>& nodes() const { return nodes_; }
  /// Leaves reached from the outputs (op == NONE): inputs, weights, constants.
  const std::vector<Tensor*>& leafs() const { return leafs_; }
  const std::vector<Tensor*>& outputs() const { return outputs_; }

  /// A hash of the graph's structure: ops, dtypes, shapes, strides, params and source wiring.
  /// Equal graphs built step after step hash equal (data pointers are not part of it).
  uint64_t structure_hash() const;

 private:
  void visit(Tensor* t);
  std::vector<Tensor*> nodes_, leafs_, outputs_;
  std::vector<Tensor*> visited_;
};

}  // namespace minfer
