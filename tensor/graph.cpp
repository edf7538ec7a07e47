#include "tensor/graph.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace minfer {

Graph::Graph(std::initializer_list<Tensor*> outputs) {
  for (Tensor* t : outputs) add_output(t);
}

void Graph::add_output(Tensor* t) {
  if (!t) throw std::invalid_argument("Graph: null output tensor");
  t->flags |= kTensorOutput;
  if (std::find(outputs_.begin(), outputs_.end(), t) == outputs_.end()) outputs_.push_back(t);
  visit(t);
}

void Graph::rebuild() {
  nodes_.clear();
  leafs_.clear();
  visited_.clear();
  for (Tensor* t : outputs_) visit(t);
}

void Graph::visit(Tensor* root) {
  // Iterative post-order DFS: deep graphs (hundreds of layers) must not overflow the stack.
  std::unordered_set<Tensor*> seen(visited_.begin(), visited_.end());
  if (seen.count(root)) return;
  struct Frame {
    Tensor* t;
    int next_src;
  };
  std::vector<Frame> stack{{root, 0}};
  seen.insert(root);
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next_src < kMaxSrc) {
      Tensor* s = f.t->src[f.next_src++];
      if (s && !seen.count(s)) {
        seen.insert(s);
        stack.push_back({s, 0});
      }
      continue;
    }
    Tensor* t = f.t;
    stack.pop_back();
    visited_.push_back(t);
    if (t->op == Op::NONE)
      leafs_.push_back(t);
    else
      nodes_.push_back(t);
  }
}

uint64_t Graph::structure_hash() const {
  // FNV-1a over the structural fields; sources are identified by their position in the graph.
  std::unordered_map<const Tensor*, uint64_t> index;
  uint64_t i = 0;
  for (const Tensor* t : leafs_) index[t] = i++;
  for (const Tensor* t : nodes_) index[t] = i++;
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  auto mix_tensor = [&](const Tensor* t) {
    mix(static_cast<uint64_t>(t->op));
    mix(static_cast<uint64_t>(t->type));
    for (int d = 0; d < kMaxDims; ++d) {
      mix(static_cast<uint64_t>(t->ne[d]));
      mix(t->nb[d]);
    }
    mix(t->flags);
    mix(t->view_offs);
    mix(t->view_src ? index.count(t->view_src) ? index[t->view_src] : ~0ull - 1 : ~0ull);
    for (int32_t p : t->op_params) mix(static_cast<uint32_t>(p));
    for (const Tensor* s : t->src) mix(s ? (index.count(s) ? index[s] : ~0ull - 2) : ~0ull);
  };
  for (const Tensor* t : leafs_) mix_tensor(t);
  for (const Tensor* t : nodes_) mix_tensor(t);
  return h;
}

}  // namespace minfer
