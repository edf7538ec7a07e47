// The CUDA backend itself: which ops have kernels (runs without a GPU), behaviour without a
// device, transfers, fill, allocation failures with a clear message.
#include <gtest/gtest.h>

#include <cstdio>
#include <cmath>
#include <cstring>
#include <set>

#include "cuda_test_util.h"
#include "models/layers.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

// One representative node per op (and per dtype where the kernel dispatches on it).
struct Probe {
  std::string what;
  Tensor* node;
};

std::vector<Probe> probes(Context& c) {
  std::vector<Probe> p;
  auto f32 = [&](std::initializer_list<int64_t> ne) { return c.new_tensor(DType::F32, ne); };
  Tensor* pos = c.new_tensor(DType::I32, {4});
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    Tensor* w = c.new_tensor(t, {256, 8});
    p.push_back({"GET_ROWS " + std::string(dtype_name(t)), ops::get_rows(c, w, pos)});
    for (DType at : {DType::F32, DType::F16})
      p.push_back({fmt::format("MUL_MAT {} x {}", dtype_name(t), dtype_name(at)),
                   ops::mul_mat(c, w, c.new_tensor(at, {256, 3}))});
    p.push_back({"CPY " + std::string(dtype_name(t)) + " -> f32", ops::cast(c, w, DType::F32)});
    for (DType at : {DType::F32, DType::F16})
      p.push_back({fmt::format("MUL_MAT_ID {} x {}", dtype_name(t), dtype_name(at)),
                   ops::mul_mat_id(c, c.new_tensor(t, {256, 8, 4}), c.new_tensor(DType::I32, {2, 3}),
                                   c.new_tensor(at, {256, 1, 3}))});
  }
  p.push_back({"TOP_K", ops::top_k(c, f32({8, 4}), 2)});
  p.push_back({"GET_ROWS 3-D table", ops::get_rows(c, f32({1, 8, 3}), c.new_tensor(DType::I32, {2, 3}))});
  for (DType to : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q8_1, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                   DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    p.push_back({"CPY f32 -> " + std::string(dtype_name(to)), ops::cast(c, f32({256, 2}), to)});
  Tensor* x = f32({64, 4, 4});
  p.push_back({"ADD", ops::add(c, x, f32({64}))});
  p.push_back({"MUL", ops::mul(c, x, f32({64}))});
  p.push_back({"SCALE", ops::scale(c, x, 2.0f)});
  p.push_back({"SILU", ops::silu(c, x)});
  p.push_back({"SWIGLU", ops::swiglu(c, x, x)});
  p.push_back({"CONCAT", ops::concat(c, x, x, 1)});
  p.push_back({"ARGMAX", ops::argmax(c, x)});
  p.push_back({"RMS_NORM", ops::rms_norm(c, x, 1e-6f, f32({64}))});
  p.push_back({"SOFT_MAX", ops::soft_max(c, f32({8, 4}), 1.0f, pos)});
  p.push_back({"ROPE", ops::rope(c, x, pos, ops::RopeParams{})});
  for (DType kv : {DType::F32, DType::F16, DType::Q8_0}) {
    Tensor* cache = c.new_tensor(kv, {64, 2, 16});
    p.push_back({"KV_STORE " + std::string(dtype_name(kv)), ops::kv_store(c, cache, f32({64, 2, 4}), pos)});
    p.push_back({"ATTENTION " + std::string(dtype_name(kv)),
                 ops::attention(c, x, cache, cache, pos, pos, c.new_tensor(DType::I32, {4, 4}), 4, 0.1f)});
  }
  // The fused ops exist only after the rewrite: a decode-sized decoder layer yields all four.
  {
    Tensor* wqkv = c.new_tensor(DType::Q4_K, {256, 64 * 8});
    models::Attention att;
    att.wq = slice(c, wqkv, 1, 0, 256);
    att.wk = slice(c, wqkv, 1, 256, 128);
    att.wv = slice(c, wqkv, 1, 384, 128);
    models::AttentionParams ap;
    ap.n_head = 4;
    ap.n_head_kv = 2;
    ap.head_dim = 64;
    ap.head_dim_v = 64;
    Tensor* kc = c.new_tensor(DType::F16, {64, 2, 16});
    Tensor* vc = c.new_tensor(DType::F16, {64, 2, 16});
    Tensor* x = f32({256, 4});
    const auto pr = att.project(c, ops::rms_norm(c, x, 1e-6f, f32({256})), pos, pos, kc, vc, ap);
    Tensor* a = ops::attention(c, pr.q, pr.k_store, pr.v_store, pos, pos, c.new_tensor(DType::I32, {1, 1}), 16, 0.125f);
    Tensor* h = models::residual_add(c, x, ops::mul_mat(c, c.new_tensor(DType::Q4_K, {256, 256}), reshape(c, a, {256, 4})));
    Tensor* wgu = c.new_tensor(DType::Q4_K, {256, 1024});
    models::SwiGluFfn ffn{slice(c, wgu, 1, 0, 512), slice(c, wgu, 1, 512, 512), c.new_tensor(DType::Q4_K, {512, 256})};
    Graph g({models::residual_add(c, h, ffn.forward(c, ops::rms_norm(c, h, 1e-6f, f32({256}))))});
    cuda::rewrite_graph(c, g);
    std::set<Op> seen;
    for (Tensor* n : g.nodes())
      if (op_is_fused(n->op) && seen.insert(n->op).second) p.push_back({std::string(op_name(n->op)) + " (fused)", n});
  }
  return p;
}

TEST(CudaCoverage, EveryBasicOpHasAKernel) {
  Context c;
  std::vector<std::string> missing;
  std::set<Op> ops_seen;
  for (const Probe& p : probes(c)) {
    ops_seen.insert(p.node->op);
    if (!cuda::op_supported(*p.node)) missing.push_back(p.what);
  }
  std::printf("[ coverage ] ops/dtypes without a CUDA kernel (%zu):\n", missing.size());
  for (const auto& m : missing) std::printf("  %s\n", m.c_str());
  // Every op of the enum (but NONE and views) is probed.
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (op == Op::NONE || op_is_view(op)) continue;
    EXPECT_TRUE(ops_seen.count(op)) << "no coverage probe for " << op_name(op);
  }
  // Allowed gaps: CPY into block types other than Q8_0/Q8_1 (the CPU's scale-searching
  // quantizers; models never need them at run time).
  for (const auto& m : missing) {
    const bool cpy_to_block = m.rfind("CPY f32 -> ", 0) == 0 && m.find("q8_") == std::string::npos;
    EXPECT_TRUE(cpy_to_block) << "missing CUDA kernel: " << m;
  }
}

TEST(CudaBackendBasics, DeviceCountNeverThrowsAndBadDeviceIsAClearError) {
  const int n = cuda::device_count();
  EXPECT_GE(n, 0);
  try {
    CudaBackend b(n + 3);
    FAIL() << "constructed a backend on a missing device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST(CudaBackendBasics, HugeAllocationIsOutOfMemoryErrorWithMessage) {
  MINFER_REQUIRE_GPU();
  try {
    auto b = gpu()->alloc_buffer(size_t{1} << 50);  // 1 PiB
    FAIL() << "allocated 1 PiB";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    std::printf("[ oom ] %s\n", m.c_str());
    EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
    EXPECT_NE(m.find("1125899906842624 bytes"), std::string::npos) << m;
  }
  // Still usable.
  auto b = gpu()->alloc_buffer(1 << 20);
  EXPECT_EQ(b->size(), size_t{1} << 20);
}

TEST(CudaBackendBasics, TransfersFillAndRangeChecks) {
  MINFER_REQUIRE_GPU();
  Context c;
  Tensor* t = c.new_tensor(DType::F32, {1 << 20, 40});  // 160 MiB: the chunked, pinned path
  auto buf = allocate_tensors(c, *gpu());
  std::vector<float> v = randn(static_cast<size_t>(t->nelements()));
  gpu()->set_tensor(*t, v.data(), 0, v.size() * 4);
  std::vector<float> back(v.size());
  gpu()->get_tensor(*t, back.data(), 0, back.size() * 4);
  EXPECT_EQ(std::memcmp(v.data(), back.data(), v.size() * 4), 0);
  // Partial ranges.
  float part[3];
  gpu()->get_tensor(*t, part, 4 * 1000, sizeof(part));
  EXPECT_EQ(part[0], v[1000]);
  EXPECT_EQ(part[2], v[1002]);
  EXPECT_THROW(gpu()->get_tensor(*t, part, t->nbytes() - 4, 8), std::out_of_range);
  // fill poisons every byte.
  buf->fill(0xFF);
  gpu()->get_tensor(*t, part, 0, sizeof(part));
  EXPECT_TRUE(std::isnan(part[0]));
}

}  // namespace
}  // namespace minfer::test
