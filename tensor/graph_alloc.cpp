#include "tensor/graph_alloc.h"

#include <fmt/format.h>

#include <limits>
#include <unordered_map>

namespace minfer {
namespace {

// A tensor gets a request when it owns storage and has none yet: graph nodes, and graph inputs
// (leaves without data). Weights and pre-filled leaves already have data.
// A tensor placed by an earlier allocate() of this allocator is placed again.
bool needs_storage(const Tensor* t, const Buffer* arena) {
  return !t->view_src && (!t->data || (arena && t->buffer == arena));
}

}  // namespace

GraphAllocator::GraphAllocator(Backend& backend) : backend_(backend) { planner_.set_allow_grow(true); }

std::vector<alloc::BufferRequest> GraphAllocator::requests_for(const Graph& g, std::vector<Owner>& owners) const {
  owners.clear();
  std::unordered_map<const Tensor*, int32_t> req_of;
  std::vector<alloc::BufferRequest> reqs;
  const size_t align = backend_.alignment();
  auto add = [&](Tensor* t, int32_t step) {
    req_of[t] = static_cast<int32_t>(reqs.size());
    owners.push_back({t, false});
    alloc::BufferRequest r{};
    r.size = t->nbytes();
    r.alignment = align;
    r.first_use = step;
    r.last_use = t->has_flag(kTensorOutput) ? alloc::kForever : step;
    reqs.push_back(r);
  };
  for (Tensor* t : g.leafs())
    if (needs_storage(t, arena_.get())) add(t, 0);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    Tensor* n = nodes[i];
    const int32_t step = static_cast<int32_t>(i);
    // Extend the life of every storage this node reads.
    for (Tensor* s : n->src) {
      if (!s) continue;
      auto it = req_of.find(s->storage_root());
      if (it == req_of.end()) continue;
      auto& r = reqs[static_cast<size_t>(it->second)];
      if (r.last_use != alloc::kForever && r.last_use < step) r.last_use = step;
    }
    // The kernel workspace lives at this node only; it is requested before the node's own
    // storage so that nothing can take it over in place.
    n->work = nullptr;
    n->work_bytes = 0;
    if (const size_t ws = backend_.workspace_bytes(*n); ws > 0) {
      n->work_bytes = ws;
      owners.push_back({n, true});
      alloc::BufferRequest r{};
      r.size = ws;
      r.alignment = align;
      r.first_use = step;
      r.last_use = step;
      reqs.push_back(r);
    }
    if (!needs_storage(n, arena_.get())) continue;
    add(n, step);
    if (op_allows_inplace(n->op) && n->src[0] && !n->has_flag(kTensorOutput)) {
      Tensor* s0 = n->src[0];
      auto it = req_of.find(s0);
      if (it != req_of.end() && !s0->view_src && s0->type == n->type && s0->is_contiguous() &&
          n->is_contiguous() && s0->nbytes() >= n->nbytes() && !s0->has_flag(kTensorInput))
        reqs.back().inplace_of = it->second;
    }
  }
  // A view of a tensor keeps it alive through the view's consumers: views were handled above via
  // storage_root(). Views that are themselves outputs pin their root.
  for (Tensor* o : g.outputs()) {
    auto it = req_of.find(o->storage_root());
    if (it != req_of.end()) reqs[static_cast<size_t>(it->second)].last_use = alloc::kForever;
  }
  return reqs;
}

void GraphAllocator::ensure_arena(size_t bytes) {
  if (arena_ && arena_->size() >= bytes) return;
  arena_.reset();  // release first: on a device the old and new arenas may not both fit
  arena_ = backend_.alloc_buffer(bytes == 0 ? 1 : bytes);
  ++generation_;
}

void GraphAllocator::reserve(const Graph& g) {
  std::vector<Owner> owners;
  auto reqs = requests_for(g, owners);
  planner_.reserve(reqs);
  ensure_arena(planner_.arena_size());
}

void GraphAllocator::allocate(Graph& g) {
  std::vector<Owner> owners;
  auto reqs = requests_for(g, owners);
  const alloc::Layout& layout = planner_.allocate(reqs);
  ensure_arena(std::max(layout.arena_size, planner_.arena_size()));
  last_stats_ = layout.stats;
  for (size_t i = 0; i < owners.size(); ++i) {
    if (!owners[i].work) {
      bind_tensor(*owners[i].t, *arena_, layout.offsets[i]);
      continue;
    }
    if (layout.offsets[i] + owners[i].t->work_bytes > arena_->size())
      throw std::out_of_range(fmt::format("graph allocator: workspace of {} outside the arena", describe(*owners[i].t)));
    owners[i].t->work = static_cast<char*>(arena_->base()) + layout.offsets[i];
  }
  for (Tensor* t : g.nodes())
    if (t->view_src) resolve_view(*t);
  for (Tensor* t : g.leafs())
    if (t->view_src) resolve_view(*t);
  if (poison_) arena_->fill(0xFF);
}

}  // namespace minfer
