#include "models/layers.h"

#include <fmt/format.h>

#include <cmath>

#include "ops/ops.h"
#include "runtime/kv_cache.h"

namespace minfer::models {

std::string blk_name(int il, std::string_view name, std::string_view kind) {
  return fmt::format("blk.{}.{}.{}", il, name, kind);
}

RmsNorm RmsNorm::load(Weights& W, std::string_view name, float eps) { return {W.get(name), eps}; }

Tensor* RmsNorm::forward(Context& ctx, Tensor* x) const { return ops::rms_norm(ctx, x, eps, weight); }

AttentionParams AttentionParams::from(const HParams& h) {
  AttentionParams p;
  p.qkv.n_head = h.n_head;
  p.qkv.n_head_kv = h.n_head_kv;
  p.qkv.head_dim = h.head_dim;
  p.qkv.rope = h.rope_params();  // the mode the model gave HParams, the GGUF's scaling, the overrides
  p.qkv.norm_eps = h.rms_eps;    // q_norm / k_norm are the model's RMSNorm (read only when present)
  p.head_dim_v = h.head_dim_v;
  p.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));
  return p;
}

Attention Attention::load(Weights& W, int il, const AttentionSpec& spec, Tensor* rope_freqs) {
  Attention a;
  // One tensor for wq|wk|wv when the dtypes allow it: ops::qkv then runs one matmul.
  auto qkv = W.get_concat_rows({blk_name(il, "attn_q"), blk_name(il, "attn_k"), blk_name(il, "attn_v")});
  a.qkv.wq = qkv[0];
  a.qkv.wk = qkv[1];
  a.qkv.wv = qkv[2];
  if (spec.qkv_bias) {
    a.qkv.bq = W.get(blk_name(il, "attn_q", "bias"));
    a.qkv.bk = W.get(blk_name(il, "attn_k", "bias"));
    a.qkv.bv = W.get(blk_name(il, "attn_v", "bias"));
  }
  if (spec.qk_norm) {
    a.qkv.q_norm = W.get(blk_name(il, "attn_q_norm"));
    a.qkv.k_norm = W.get(blk_name(il, "attn_k_norm"));
  }
  a.qkv.rope_freqs = rope_freqs;
  a.wo = W.get(blk_name(il, "attn_output"));
  return a;
}

Tensor* Attention::forward(Context& ctx, Tensor* x, const Batch& b, KvCache& kv, int il, const AttentionParams& p) const {
  // q/k/v (+ bias, + q/k RMSNorm), RoPE and the KV store in one op; its decomposition is
  // ops/lower.cpp, and the CUDA backend has a fused kernel for it.
  Tensor* q = ops::qkv(ctx, x, qkv, b.pos, b.cells, kv.k(il), kv.v(il), p.qkv);
  Tensor* a = ops::attention(ctx, q, kv.k(il), kv.v(il), b.pos, b.seq, kv.block_table(), kv.block_size(), p.kq_scale);
  a = reshape(ctx, a, {static_cast<int64_t>(p.head_dim_v) * p.qkv.n_head, b.tokens->ne[0]});
  return ops::mul_mat(ctx, wo, a);
}

SwiGluFfn SwiGluFfn::load(Weights& W, int il) {
  auto gu = W.get_concat_rows({blk_name(il, "ffn_gate"), blk_name(il, "ffn_up")});
  return {gu[0], gu[1], W.get(blk_name(il, "ffn_down"))};
}

Tensor* SwiGluFfn::forward(Context& ctx, Tensor* x) const { return ops::ffn_swiglu(ctx, x, gate, up, down); }

Embedding Embedding::load(Weights& W) { return {W.get("token_embd.weight")}; }

Tensor* Embedding::forward(Context& ctx, Tensor* tokens) const { return ops::get_rows(ctx, weight, tokens); }

LmHead LmHead::load(Weights& W, const Embedding& tok_embd, float eps) {
  LmHead h;
  h.norm = RmsNorm::load(W, "output_norm.weight", eps);
  h.output = W.find("output.weight");
  if (!h.output) h.output = tok_embd.weight;  // tied embeddings
  return h;
}

Tensor* LmHead::forward(Context& ctx, Tensor* x, Tensor* out_rows) const {
  // Keep only the rows that need logits (the last token while generating) before the norm and
  // the vocabulary-sized matmul.
  x = ops::get_rows(ctx, x, out_rows);
  return ops::mul_mat(ctx, output, norm.forward(ctx, x));  // [n_vocab, n_out]
}

}  // namespace minfer::models
