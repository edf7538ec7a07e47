// A decode-sized decoder layer in Qwen2's shape (q/k/v biases, Q4_K_M-style weights) followed by
// a MoE FFN, built from the toolkit's blocks (models/layers.h) on tensors without storage: the
// graph on which every CUDA rewrite pattern should fire. tests/cuda/test_cuda_fused.cpp checks
// that it does (no device needed); tests/ops/cases_fused.cpp probes the fused nodes it yields for
// the coverage check.
#pragma once

#include "models/layers.h"
#include "ops/ops.h"

namespace minfer::test {

/// x: f32 [256, T] -> the MoE layer's output (8 experts, k of them per token) after the decoder
/// layer; T <= 8 keeps every decode pattern (MMVQ sizes).
inline Tensor* layer_and_moe_graph(Context& c, int64_t T, int32_t k = 2) {
  auto f32 = [&](std::initializer_list<int64_t> ne) { return c.new_tensor(DType::F32, ne); };
  const int64_t n_embd = 256;
  Tensor* pos = c.new_tensor(DType::I32, {T});
  Tensor* wqkv = c.new_tensor(DType::Q4_K, {n_embd, 64 * 8});
  models::Attention att;
  att.wq = slice(c, wqkv, 1, 0, 256);
  att.wk = slice(c, wqkv, 1, 256, 128);
  att.wv = slice(c, wqkv, 1, 384, 128);
  att.bq = f32({256});
  att.bk = f32({128});
  att.bv = f32({128});
  models::AttentionParams ap;
  ap.n_head = 4;
  ap.n_head_kv = 2;
  ap.head_dim = 64;
  ap.head_dim_v = 64;
  Tensor* kc = c.new_tensor(DType::F16, {64, 2, 16});
  Tensor* vc = c.new_tensor(DType::F16, {64, 2, 16});
  Tensor* x = f32({n_embd, T});
  const auto pr = att.project(c, ops::rms_norm(c, x, 1e-6f, f32({n_embd})), pos, pos, kc, vc, ap);
  Tensor* a = ops::attention(c, pr.q, pr.k_store, pr.v_store, pos, pos, c.new_tensor(DType::I32, {1, 1}), 16, 0.125f);
  Tensor* h = models::residual_add(c, x, ops::mul_mat(c, c.new_tensor(DType::Q4_K, {n_embd, n_embd}), reshape(c, a, {n_embd, T})));
  Tensor* wgu = c.new_tensor(DType::Q4_K, {n_embd, 1024});
  models::SwiGluFfn ffn{slice(c, wgu, 1, 0, 512), slice(c, wgu, 1, 512, 512), c.new_tensor(DType::Q6_K, {512, n_embd}), {}};
  h = models::residual_add(c, h, ffn.forward(c, ops::rms_norm(c, h, 1e-6f, f32({n_embd}))));
  models::MoeFfn moe;
  moe.router = f32({n_embd, 8});
  moe.gate_exps = c.new_tensor(DType::Q4_K, {n_embd, 256, 8});
  moe.up_exps = c.new_tensor(DType::Q4_K, {n_embd, 256, 8});
  moe.down_exps = c.new_tensor(DType::Q6_K, {256, n_embd, 8});
  moe.k = k;
  return models::residual_add(c, h, moe.forward(c, ops::rms_norm(c, h, 1e-6f, f32({n_embd}))));
}

}  // namespace minfer::test
