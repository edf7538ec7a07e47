// Graph order, the graph allocator (liveness, in-place, layout reuse), structure hashing.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common/op_harness.h"
#include "common/test_util.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/executor.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

// A chain of element-wise ops with a residual, like a small transformer block.
Tensor* build_chain(Context& c, Tensor* x, Tensor* w, int n_layers) {
  Tensor* h = x;
  for (int i = 0; i < n_layers; ++i) {
    Tensor* n = ops::rms_norm(c, h, 1e-6f, w);
    Tensor* a = ops::silu(c, ops::scale(c, n, 0.5f));
    h = ops::add(c, h, a);
  }
  return h;
}

TEST(Graph, TopologicalOrderSourcesFirst) {
  Context c;
  Tensor* x = c.new_tensor(DType::F32, {8, 2});
  Tensor* w = c.new_tensor(DType::F32, {8});
  Graph g({build_chain(c, x, w, 3)});
  std::map<const Tensor*, size_t> idx;
  for (size_t i = 0; i < g.nodes().size(); ++i) idx[g.nodes()[i]] = i;
  for (Tensor* n : g.nodes())
    for (Tensor* s : n->src)
      if (s && s->op != Op::NONE) {
        EXPECT_LT(idx.at(s), idx.at(n));
      }
  EXPECT_EQ(g.leafs().size(), 2u);
  EXPECT_EQ(g.nodes().size(), 12u);
}

TEST(Graph, AllocatorReusesMemoryInPlaceAndComputesCorrectly) {
  CpuBackend cpu(2);
  const int n_layers = 6;
  Tensor *x = nullptr, *w = nullptr;
  LeafData data;
  auto r = run_op(cpu, [&](Context& c) {
    x = c.new_tensor(DType::F32, {256, 4});
    w = c.new_tensor(DType::F32, {256});
    return build_chain(c, x, w, n_layers);
  }, data);
  const auto& st = r.exec->allocator().last_stats();
  const size_t one = 256 * 4 * 4;
  EXPECT_GT(st.inplace_hits, 0u);
  EXPECT_GT(st.bytes_reused, 0u);
  // 4 nodes per layer would need 4 * n_layers buffers without reuse; liveness keeps a handful.
  EXPECT_LE(st.arena_bytes, 4 * one + 4096);
  // Same values as a straightforward evaluation.
  std::vector<double> h(static_cast<size_t>(256 * 4));
  auto xs = to_f32(*x), ws = to_f32(*w);
  for (size_t i = 0; i < h.size(); ++i) h[i] = xs[i];
  for (int l = 0; l < n_layers; ++l)
    for (int t = 0; t < 4; ++t) {
      double ss = 0;
      for (int i = 0; i < 256; ++i) ss += h[static_cast<size_t>(t * 256 + i)] * h[static_cast<size_t>(t * 256 + i)];
      const double inv = 1 / std::sqrt(ss / 256 + 1e-6);
      std::vector<double> a(256);
      for (int i = 0; i < 256; ++i) {
        const double n = h[static_cast<size_t>(t * 256 + i)] * inv * ws[static_cast<size_t>(i)] * 0.5;
        a[static_cast<size_t>(i)] = n / (1 + std::exp(-n));
      }
      for (int i = 0; i < 256; ++i) h[static_cast<size_t>(t * 256 + i)] += a[static_cast<size_t>(i)];
    }
  expect_close(r.values, h, 1e-10, "chain");
}

TEST(Graph, EqualGraphsReuseTheLayoutStepAfterStep) {
  CpuBackend cpu(1);
  Executor exec(cpu);
  Context weights;
  Tensor* w = weights.new_tensor(DType::F32, {64});
  auto wbuf = allocate_tensors(weights, cpu);
  for (int step = 0; step < 5; ++step) {
    Context c;
    Tensor* x = c.new_tensor(DType::F32, {64, step % 2 ? 1 : 3});  // alternate two shapes
    x->flags |= kTensorInput;
    Graph g({build_chain(c, x, w, 2)});
    exec.allocate(c, g);
    EXPECT_NE(x->data, nullptr);
  }
  EXPECT_EQ(exec.allocator().n_layout_reuses(), 3u);
}

TEST(Graph, StructureHashIgnoresDataButNotShapes) {
  auto hash_of = [](int64_t n, float s) {
    Context c;
    Tensor* x = c.new_tensor(DType::F32, {n});
    Graph g({ops::scale(c, x, s)});
    return g.structure_hash();
  };
  EXPECT_EQ(hash_of(8, 1.0f), hash_of(8, 1.0f));
  EXPECT_NE(hash_of(8, 1.0f), hash_of(9, 1.0f));
  EXPECT_NE(hash_of(8, 1.0f), hash_of(8, 2.0f));
}

TEST(Graph, OutputsAndInputsAreNeverOverwritten) {
  CpuBackend cpu(1);
  Executor exec(cpu);
  Context c;
  Tensor* x = c.new_tensor(DType::F32, {32});
  x->flags |= kTensorInput;
  Tensor* mid = ops::scale(c, x, 2.0f);  // also an output
  Tensor* out = ops::silu(c, ops::add(c, mid, mid));
  Graph g;
  g.add_output(mid);
  g.add_output(out);
  exec.allocate(c, g);
  // mid is an output: no later node may take its storage.
  for (Tensor* n : g.nodes())
    if (n != mid) {
      EXPECT_NE(n->data, mid->data) << describe(*n);
    }
  EXPECT_NE(x->data, mid->data);  // inputs are not taken over in place
}

}  // namespace
}  // namespace minfer::test

namespace minfer::test {
namespace {

TEST(Graph, ReserveSizesTheArenaOnceForSmallerGraphs) {
  CpuBackend cpu(1);
  Executor exec(cpu);
  Context weights;
  Tensor* w = weights.new_tensor(DType::F32, {64});
  auto wbuf = allocate_tensors(weights, cpu);
  auto chain = [&](Context& c, int64_t n) {
    Tensor* x = c.new_tensor(DType::F32, {64, n});
    x->flags |= kTensorInput;
    return Graph({build_chain(c, x, w, 3)});
  };
  Context big;
  Graph gb = chain(big, 32);
  exec.reserve(big, gb);
  const size_t reserved = exec.allocator().arena_size();
  const uint64_t gen = exec.allocator().generation();
  EXPECT_GT(reserved, 0u);
  for (int64_t n : {1, 7, 32, 3}) {
    Context c;
    Graph g = chain(c, n);
    exec.allocate(c, g);
    EXPECT_EQ(exec.allocator().arena_size(), reserved) << "n = " << n;
  }
  EXPECT_EQ(exec.allocator().generation(), gen) << "the arena was replaced after the measure pass";
  // A graph larger than the reserved worst case grows the arena (and says so).
  Context huge;
  Graph gh = chain(huge, 64);
  exec.allocate(huge, gh);
  EXPECT_GT(exec.allocator().arena_size(), reserved);
  EXPECT_GT(exec.allocator().generation(), gen);
}

}  // namespace
}  // namespace minfer::test
