// Llama model definition. Reference: Transformers' modeling_llama.py (LlamaDecoderLayer,
// LlamaAttention, LlamaMLP; the llama3 rope_type in modeling_rope_utils.py) and llama.cpp's
// src/models/llama.cpp.
#include "models/llama/llama.h"

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "models/layers.h"
#include "ops/ops.h"

namespace minfer::models {
namespace {

class Llama final : public Model {
 public:
  // hp: the file's hyper-parameters, which the load functions check the tensor shapes against
  // (whole tensors; hp_ is a tensor-parallel rank's share).
  Llama(const HParams& hp, std::unique_ptr<Weights> w) : Model(hp, std::move(w)) {
    Weights& W = *weights_;
    const gguf::File& f = W.file();
    // Transformers' mlp_bias has no place in the SwiGLU op: refuse it rather than drop it.
    if (f.find_tensor("blk.0.ffn_up.bias") || f.find_tensor("blk.0.ffn_down.bias"))
      throw std::invalid_argument(fmt::format("{}: llama with FFN biases (mlp_bias) is not supported", f.name()));
    AttentionSpec spec;
    spec.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;  // Transformers' attention_bias
    // Llama 3.1's llama3 rope_type: the converter stores the per-frequency divisors as a tensor.
    Tensor* rope_freqs = W.find("rope_freqs.weight", {hp.n_rot / 2});
    embed_tokens_ = Embedding::load(W, hp);
    for (int il = 0; il < hp.n_layer; ++il)
      layers_.push_back(Layer::load(W, il, hp, spec, SwiGluFfn::load(W, il, hp), rope_freqs));
    lm_head_ = LmHead::load(W, hp, embed_tokens_);  // tied when output.weight is absent
  }

  Tensor* build(Context& ctx, const Batch& b, KvCache& kv) const override {
    const AttentionParams ap = AttentionParams::from(hp_);
    Tensor* x = embed_tokens_.forward(ctx, b.tokens);  // [n_embd, n_tokens]
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

std::unique_ptr<Model> make_llama(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard) {
  // NORMAL: the converter permuted wq / wk so that GGUF's adjacent pairs rotate as rotate_half did.
  HParams hp = HParams::from_gguf(*file, ops::RopeMode::NORMAL);
  auto w = std::make_unique<Weights>(std::move(file), backend, shard);
  return std::make_unique<Llama>(hp, std::move(w));
}

}  // namespace minfer::models
