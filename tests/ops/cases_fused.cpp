// The fused-op hook (tests/ops/cases.h). Fused ops exist only after a backend's rewrite
// (Backend::rewrite): no builder makes them, so a case of basic ops is what reaches them. The
// fused tests build the toolkit's blocks (models/layers.h) and check both the values and which
// fused ops the rewritten graph holds: tests/cuda/test_cuda_fused.cpp (QKV, FFN_SWIGLU,
// MUL_MAT_ADD, RMS_NORM_Q8_1, MOE_SUM against the CPU running the basic ops) and tests/ops/test_fused.cpp
// (the same blocks on the CPU against double references). Here: the probes that let the coverage
// check see what a backend claims for the fused ops, made by the CUDA rewrite of a decode-sized
// decoder layer and a MoE FFN.
#include "cases.h"
#include "models/layers.h"

#ifdef MINFER_TEST_CUDA
#include "ops/cuda/cuda_backend.h"
#endif

namespace minfer::test {

void add_fused_cases(std::vector<OpCase>& /*v*/) {}

void add_fused_probes(Context& c, std::vector<Probe>& probes) {
#ifdef MINFER_TEST_CUDA
  auto f32 = [&](std::initializer_list<int64_t> ne) { return c.new_tensor(DType::F32, ne); };
  Tensor* pos = c.new_tensor(DType::I32, {4});
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
  Tensor* out = models::residual_add(c, h, ffn.forward(c, ops::rms_norm(c, h, 1e-6f, f32({256}))));
  models::MoeFfn moe;
  moe.router = c.new_tensor(DType::F32, {256, 8});
  moe.gate_exps = c.new_tensor(DType::Q4_K, {256, 256, 8});
  moe.up_exps = c.new_tensor(DType::Q4_K, {256, 256, 8});
  moe.down_exps = c.new_tensor(DType::Q6_K, {256, 256, 8});
  moe.k = 2;
  Graph g({models::residual_add(c, out, moe.forward(c, out))});
  cuda::rewrite_graph(c, g);
  for (Tensor* n : g.nodes())
    if (op_is_fused(n->op)) probes.push_back({std::string(op_name(n->op)) + " (fused, decode-sized layer)", n});
#else
  (void)c;
  (void)probes;
#endif
}

const std::vector<std::string>& covered_by_fused_cases() {
  static const std::vector<std::string> keys = {"QKV", "FFN_SWIGLU", "MUL_MAT_ADD", "RMS_NORM_Q8_1", "MOE_SUM"};
  return keys;
}

}  // namespace minfer::test
