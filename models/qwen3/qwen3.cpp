// Qwen3 model definition: weights by GGUF name, then the forward graph from library ops.
// Reference: Transformers' modeling_qwen3.py (Qwen3Attention applies q_norm/k_norm per head
// before RoPE) and llama.cpp's src/models/qwen3.cpp.
#include "models/qwen3/qwen3.h"

#include <fmt/format.h>

#include <cmath>

#include "gguf/gguf.h"
#include "ops/ops.h"
#include "runtime/kv_cache.h"

namespace minfer::models {
namespace {

class Qwen3 final : public Model {
 public:
  Qwen3(HParams hp, std::unique_ptr<Weights> w) : Model(std::move(hp), std::move(w)) {
    Weights& W = *weights_;
    tok_embd_ = W.get("token_embd.weight");
    output_norm_ = W.get("output_norm.weight");
    output_ = W.find("output.weight");
    if (!output_) output_ = tok_embd_;  // tied embeddings
    for (int i = 0; i < hp_.n_layer; ++i) {
      auto n = [i](const char* s) { return fmt::format("blk.{}.{}.weight", i, s); };
      Layer L;
      L.attn_norm = W.get(n("attn_norm"));
      auto qkv = W.get_concat_rows({n("attn_q"), n("attn_k"), n("attn_v")});
      L.qkv.wq = qkv[0];
      L.qkv.wk = qkv[1];
      L.qkv.wv = qkv[2];
      L.qkv.q_norm = W.get(n("attn_q_norm"));
      L.qkv.k_norm = W.get(n("attn_k_norm"));
      L.wo = W.get(n("attn_output"));
      L.ffn_norm = W.get(n("ffn_norm"));
      auto gu = W.get_concat_rows({n("ffn_gate"), n("ffn_up")});
      L.w_gate = gu[0];
      L.w_up = gu[1];
      L.w_down = W.get(n("ffn_down"));
      layers_.push_back(L);
    }
  }

  Tensor* build(Context& ctx, const Batch& b, KvCache& kv) const override {
    const HParams& h = hp_;
    const int64_t n_tokens = b.tokens->ne[0];
    ops::QkvParams qp;
    qp.n_head = h.n_head;
    qp.n_head_kv = h.n_head_kv;
    qp.head_dim = h.head_dim;
    qp.rope = h.rope_params();  // RoPE with the GGUF's scaling (linear, YaRN)
    qp.norm_eps = h.rms_eps;
    const float kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));

    Tensor* x = ops::get_rows(ctx, tok_embd_, b.tokens);  // [n_embd, n_tokens]
    for (int il = 0; il < h.n_layer; ++il) {
      const Layer& L = layers_[static_cast<size_t>(il)];
      // Attention block: RMSNorm -> q/k/v (+ q/k RMSNorm, RoPE, KV store) -> attention -> wo.
      Tensor* hn = ops::rms_norm(ctx, x, h.rms_eps, L.attn_norm);
      Tensor* q = ops::qkv(ctx, hn, L.qkv, b.pos, b.cells, kv.k(il), kv.v(il), qp);
      Tensor* a = ops::attention(ctx, q, kv.k(il), kv.v(il), b.pos, b.seq, kv.block_table(), kv.block_size(), kq_scale);
      a = reshape(ctx, a, {static_cast<int64_t>(h.head_dim_v) * h.n_head, n_tokens});
      x = ops::add(ctx, x, ops::mul_mat(ctx, L.wo, a));
      // Feed-forward block: RMSNorm -> SwiGLU FFN.
      hn = ops::rms_norm(ctx, x, h.rms_eps, L.ffn_norm);
      x = ops::add(ctx, x, ops::ffn_swiglu(ctx, hn, L.w_gate, L.w_up, L.w_down));
    }
    // Logits only for the rows asked for (the last token while generating).
    x = ops::get_rows(ctx, x, b.out_rows);
    x = ops::rms_norm(ctx, x, h.rms_eps, output_norm_);
    return ops::mul_mat(ctx, output_, x);  // [n_vocab, n_out]
  }

 private:
  struct Layer {
    Tensor *attn_norm, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
    ops::QkvWeights qkv;
  };
  Tensor *tok_embd_, *output_norm_, *output_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3(std::shared_ptr<const gguf::File> file, Backend& backend) {
  HParams hp = HParams::from_gguf(*file);
  auto w = std::make_unique<Weights>(std::move(file), backend);
  return std::make_unique<Qwen3>(std::move(hp), std::move(w));
}

}  // namespace minfer::models
