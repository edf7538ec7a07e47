// Qwen3-MoE model definition: weights by GGUF name, then the forward graph from library ops.
// Reference: Transformers' modeling_qwen3_moe.py (Qwen3MoeSparseMoeBlock: softmax over the router
// logits in f32, top-k, divided by their sum when norm_topk_prob; every expert a SwiGLU MLP) and
// llama.cpp's src/models/qwen3moe.cpp (build_moe_ffn with softmax gating, weights normalized).
#include "models/qwen3moe/qwen3moe.h"

#include <fmt/format.h>

#include <cmath>

#include "gguf/gguf.h"
#include "ops/ops.h"
#include "runtime/kv_cache.h"

namespace minfer::models {
namespace {

class Qwen3Moe final : public Model {
 public:
  Qwen3Moe(HParams hp, std::unique_ptr<Weights> w) : Model(std::move(hp), std::move(w)) {
    Weights& W = *weights_;
    if (hp_.n_expert <= 0 || hp_.n_ff_exp <= 0)
      throw std::invalid_argument(fmt::format("{}: qwen3moe needs {}.expert_count and expert_feed_forward_length",
                                              W.file().name(), hp_.arch));
    // The GGUF has no norm_topk_prob: llama.cpp always renormalizes for qwen3moe (every Qwen3-MoE
    // release sets it); expert_weights_norm is llama.cpp's key for models that may not.
    norm_w_ = W.file().get_bool_or(hp_.arch + ".expert_weights_norm", true);
    tok_embd_ = W.get("token_embd.weight");
    output_norm_ = W.get("output_norm.weight");
    output_ = W.find("output.weight");
    if (!output_) output_ = tok_embd_;  // tied embeddings
    for (int i = 0; i < hp_.n_layer; ++i) {
      auto n = [i](const char* s) { return fmt::format("blk.{}.{}.weight", i, s); };
      // Expert tensors are [n_in, n_out, n_expert]; a wrong shape would only fail deep in a graph.
      auto exps = [&](const char* s, int64_t n_in, int64_t n_out) {
        Tensor* t = W.get(n(s));
        if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != hp_.n_expert || t->ne[3] != 1)
          throw std::invalid_argument(fmt::format("{}: {} is {}, expected [{}, {}, {}]", W.file().name(), n(s),
                                                  describe(*t), n_in, n_out, hp_.n_expert));
        return t;
      };
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
      L.router = W.get(n("ffn_gate_inp"));  // [n_embd, n_expert]
      L.gate_exps = exps("ffn_gate_exps", hp_.n_embd, hp_.n_ff_exp);
      L.up_exps = exps("ffn_up_exps", hp_.n_embd, hp_.n_ff_exp);
      L.down_exps = exps("ffn_down_exps", hp_.n_ff_exp, hp_.n_embd);
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
    qp.rope = h.rope_params();
    qp.norm_eps = h.rms_eps;
    const float kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));

    Tensor* x = ops::get_rows(ctx, tok_embd_, b.tokens);  // [n_embd, n_tokens]
    for (int il = 0; il < h.n_layer; ++il) {
      const Layer& L = layers_[static_cast<size_t>(il)];
      // Attention block, as Qwen3.
      Tensor* hn = ops::rms_norm(ctx, x, h.rms_eps, L.attn_norm);
      Tensor* q = ops::qkv(ctx, hn, L.qkv, b.pos, b.cells, kv.k(il), kv.v(il), qp);
      Tensor* a = ops::attention(ctx, q, kv.k(il), kv.v(il), b.pos, b.seq, kv.block_table(), kv.block_size(), kq_scale);
      a = reshape(ctx, a, {static_cast<int64_t>(h.head_dim_v) * h.n_head, n_tokens});
      x = ops::add(ctx, x, ops::mul_mat(ctx, L.wo, a));
      // Sparse feed-forward block: RMSNorm -> router -> k SwiGLU experts -> weighted sum.
      hn = ops::rms_norm(ctx, x, h.rms_eps, L.ffn_norm);
      x = ops::add(ctx, x, moe_ffn(ctx, hn, L));
    }
    x = ops::get_rows(ctx, x, b.out_rows);
    x = ops::rms_norm(ctx, x, h.rms_eps, output_norm_);
    return ops::mul_mat(ctx, output_, x);  // [n_vocab, n_out]
  }

 private:
  struct Layer {
    Tensor *attn_norm, *wo, *ffn_norm, *router, *gate_exps, *up_exps, *down_exps;
    ops::QkvWeights qkv;
  };

  // x: [n_embd, n_tokens] -> [n_embd, n_tokens].
  Tensor* moe_ffn(Context& ctx, Tensor* x, const Layer& L) const {
    const int64_t n_embd = x->ne[0], n_tokens = x->ne[1], n_expert = hp_.n_expert, k = hp_.n_expert_used;
    Tensor* logits = ops::mul_mat(ctx, L.router, x);  // [n_expert, n_tokens]
    // softmax is monotonic: the top-k logits select the experts of the top-k probabilities.
    Tensor* ids = ops::top_k(ctx, logits, static_cast<int32_t>(k));  // I32 [k, n_tokens]
    Tensor* w;
    if (norm_w_) {
      // softmax(l)_i / sum over the selected j of softmax(l)_j = exp(l_i) / sum exp(l_j): the
      // softmax over the selected logits.
      w = ops::get_rows(ctx, reshape(ctx, logits, {1, n_expert, n_tokens}), ids);  // [1, k, n_tokens]
      w = ops::soft_max(ctx, reshape(ctx, w, {k, n_tokens}), 1.0f);
    } else {
      Tensor* probs = ops::soft_max(ctx, logits, 1.0f);
      w = ops::get_rows(ctx, reshape(ctx, probs, {1, n_expert, n_tokens}), ids);
    }
    Tensor* x3 = reshape(ctx, x, {n_embd, 1, n_tokens});  // one activation row per token, for all k
    Tensor* hid = ops::swiglu(ctx, ops::mul_mat_id(ctx, L.gate_exps, ids, x3), ops::mul_mat_id(ctx, L.up_exps, ids, x3));
    Tensor* y = ops::mul_mat_id(ctx, L.down_exps, ids, hid);  // [n_embd, k, n_tokens]
    y = ops::mul(ctx, y, reshape(ctx, w, {1, k, n_tokens}));
    // Sum over the k slots (llama.cpp's build_moe_ffn does the same with views).
    auto slot = [&](int64_t j) { return view(ctx, y, {n_embd, n_tokens}, {y->nb[2]}, static_cast<size_t>(j) * y->nb[1]); };
    Tensor* out = slot(0);
    for (int64_t j = 1; j < k; ++j) out = ops::add(ctx, out, slot(j));
    return out;
  }

  bool norm_w_ = true;
  Tensor *tok_embd_, *output_norm_, *output_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3moe(std::shared_ptr<const gguf::File> file, Backend& backend) {
  HParams hp = HParams::from_gguf(*file);
  auto w = std::make_unique<Weights>(std::move(file), backend);
  return std::make_unique<Qwen3Moe>(std::move(hp), std::move(w));
}

}  // namespace minfer::models
