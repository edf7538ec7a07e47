// GraphAllocator: gives every intermediate tensor of a graph storage in one backend arena,
// through the standalone liveness planner in allocator/ (minfer::alloc).
//
// Each node that owns storage becomes a BufferRequest: born at its node index, dead after its
// last consumer (views extend their source's life), never for outputs. An op that allows it
// (op_allows_inplace) may take over its first source's storage when that source dies there.
// Graph inputs created without data (token ids, positions) are allocated too, alive from step 0.
// A node's kernel workspace (Backend::workspace_bytes) is a request alive at that node only.
// Equal graphs (same request list) reuse the cached layout: no planning, no allocation per step.
#pragma once

#include <cstdint>
#include <memory>

#include "minfer/allocator.h"
#include "tensor/backend.h"
#include "tensor/graph.h"

namespace minfer {

class GraphAllocator {
 public:
  explicit GraphAllocator(Backend& backend);

  /// Measure pass: plans `g` and makes the arena large enough for it and for every graph
  /// reserved before (the worst case), allocating the backend buffer once.
  void reserve(const Graph& g);

  /// Assigns storage to every tensor of `g` that needs it. When a graph needs more than the
  /// reserved arena, the arena grows (the old buffer is released; its contents are lost).
  void allocate(Graph& g);

  /// Fill the arena with 0xFF bytes (NaN as f32/f16) after each allocate(), so a kernel that
  /// leaves part of its output unwritten is caught. For tests.
  void set_poison(bool on) { poison_ = on; }

  size_t arena_size() const { return arena_ ? arena_->size() : 0; }
  /// Increments whenever the arena buffer is replaced. A graph allocated at generation g keeps
  /// valid storage while generation() == g, so a caller may compute it again without allocate().
  uint64_t generation() const { return generation_; }
  const alloc::AllocStats& last_stats() const { return last_stats_; }
  /// How many allocate() calls reused a cached layout.
  size_t n_layout_reuses() const { return planner_.n_layout_reuses(); }

 private:
  struct Plan;
  /// Who gets request i's offset: tensor t's storage, or (work) t's kernel workspace.
  struct Owner {
    Tensor* t;
    bool work;
  };
  std::vector<alloc::BufferRequest> requests_for(const Graph& g, std::vector<Owner>& owners) const;
  void ensure_arena(size_t bytes);

  Backend& backend_;
  alloc::GraphAllocator planner_;
  std::unique_ptr<Buffer> arena_;
  alloc::AllocStats last_stats_{};
  bool poison_ = false;
  uint64_t generation_ = 0;
};

}  // namespace minfer
