// Qwen3 model definition. Reference: Transformers' modeling_qwen3.py (Qwen3Attention applies
// q_norm / k_norm per head before RoPE) and llama.cpp's src/models/qwen3.cpp.
#include "models/qwen3/qwen3.h"

#include "gguf/gguf.h"
#include "models/layers.h"
#include "ops/ops.h"

namespace minfer::models {
namespace {

class Qwen3 final : public Model {
 public:
  // hp: the file's hyper-parameters, which the load functions check the tensor shapes against
  // (whole tensors; hp_ is a tensor-parallel rank's share).
  Qwen3(const HParams& hp, std::unique_ptr<Weights> w) : Model(hp, std::move(w)) {
    Weights& W = *weights_;
    AttentionSpec spec;
    spec.qk_norm = true;  // attn_q_norm / attn_k_norm: RMSNorm over each head's head_dim
    embed_tokens_ = Embedding::load(W, hp);
    for (int il = 0; il < hp.n_layer; ++il)
      layers_.push_back(Layer::load(W, il, hp, spec, SwiGluFfn::load(W, il, hp)));
    lm_head_ = LmHead::load(W, hp, embed_tokens_);  // tied when output.weight is absent
  }

  Tensor* build(Context& ctx, const Batch& b, KvCache& kv) const override {
    const AttentionParams ap = AttentionParams::from(hp_);  // head_dim from attention.key_length
    Tensor* x = embed_tokens_.forward(ctx, b.tokens);      // [n_embd, n_tokens]
    for (int il = 0; il < hp_.n_layer; ++il) x = layers_[static_cast<size_t>(il)].forward(ctx, x, b, kv, il, ap);
    return lm_head_.forward(ctx, x, b.out_rows);  // [n_vocab, n_out]
  }

 private:
  using Layer = DecoderLayer<SwiGluFfn>;
  Embedding embed_tokens_;
  std::vector<Layer> layers_;
  LmHead lm_head_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard) {
  HParams hp = HParams::from_gguf(*file, ops::RopeMode::NEOX);  // rotate_half, as in Transformers
  auto w = std::make_unique<Weights>(std::move(file), backend, shard);
  return std::make_unique<Qwen3>(hp, std::move(w));
}

}  // namespace minfer::models
