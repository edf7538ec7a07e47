// Qwen3-MoE model definition. Reference: Transformers' modeling_qwen3_moe.py (Qwen3MoeAttention
// as Qwen3's; Qwen3MoeSparseMoeBlock: softmax over the router logits, top-k, divided by their sum
// when norm_topk_prob; every expert a SwiGLU MLP) and llama.cpp's src/models/qwen3moe.cpp.
#include "models/qwen3moe/qwen3moe.h"

#include "gguf/gguf.h"
#include "models/layers.h"
#include "ops/ops.h"

namespace minfer::models {
namespace {

class Qwen3Moe final : public Model {
 public:
  // hp: the file's hyper-parameters, which the load functions check the tensor shapes against
  // (whole tensors; hp_ is a tensor-parallel rank's share).
  Qwen3Moe(const HParams& hp, std::unique_ptr<Weights> w) : Model(hp, std::move(w)) {
    Weights& W = *weights_;
    AttentionSpec spec;
    spec.qk_norm = true;  // attn_q_norm / attn_k_norm, as Qwen3
    // The GGUF has no norm_topk_prob: llama.cpp always renormalizes for qwen3moe (every Qwen3-MoE
    // release sets it); expert_weights_norm is llama.cpp's key for models that may not.
    const bool norm_topk_prob = W.file().get_bool_or(hp.arch + ".expert_weights_norm", true);
    embed_tokens_ = Embedding::load(W, hp);
    for (int il = 0; il < hp.n_layer; ++il)
      layers_.push_back(Layer::load(W, il, hp, spec, MoeFfn::load(W, il, hp, norm_topk_prob)));
    lm_head_ = LmHead::load(W, hp, embed_tokens_);
  }

  Tensor* build(Context& ctx, const Batch& b, KvCache& kv) const override {
    const AttentionParams ap = AttentionParams::from(hp_);
    Tensor* x = embed_tokens_.forward(ctx, b.tokens);  // [n_embd, n_tokens]
    for (int il = 0; il < hp_.n_layer; ++il) x = layers_[static_cast<size_t>(il)].forward(ctx, x, b, kv, il, ap);
    return lm_head_.forward(ctx, x, b.out_rows);  // [n_vocab, n_out]
  }

 private:
  using Layer = DecoderLayer<MoeFfn>;
  Embedding embed_tokens_;
  std::vector<Layer> layers_;
  LmHead lm_head_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3moe(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard) {
  HParams hp = HParams::from_gguf(*file, ops::RopeMode::NEOX);  // rotate_half, as in Transformers
  auto w = std::make_unique<Weights>(std::move(file), backend, shard);
  return std::make_unique<Qwen3Moe>(hp, std::move(w));
}

}  // namespace minfer::models
