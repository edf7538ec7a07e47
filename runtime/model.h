// The model interface that model definition files (models/<arch>/) implement, and the
// hyper-parameters read from GGUF metadata.
#pragma once

#include <memory>
#include <string>

#include "ops/rope.h"
#include "runtime/weights.h"
#include "tensor/context.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

class KvCache;

/// Hyper-parameters of a decoder-only transformer, named as in GGUF (`<arch>.<key>`).
struct HParams {
  std::string arch;     ///< general.architecture
  std::string name;     ///< general.name (may be empty)
  int32_t n_layer = 0;  ///< block_count
  int32_t n_embd = 0;   ///< embedding_length
  int32_t n_ff = 0;     ///< feed_forward_length
  int32_t n_head = 0;   ///< attention.head_count
  int32_t n_head_kv = 0;     ///< attention.head_count_kv (default n_head)
  int32_t head_dim = 0;      ///< attention.key_length (default n_embd / n_head)
  int32_t head_dim_v = 0;    ///< attention.value_length (default head_dim)
  int32_t n_ctx_train = 0;   ///< context_length
  int32_t n_vocab = 0;       ///< rows of token_embd
  int32_t n_rot = 0;         ///< rope.dimension_count (default head_dim)
  float rope_freq_base = 10000.0f;  ///< rope.freq_base
  float rms_eps = 1e-6f;            ///< attention.layer_norm_rms_epsilon
  ops::RopeMode rope_mode = ops::RopeMode::NEOX;

  /// Reads the llama-style keys for `general.architecture`. Throws gguf::Error for missing or
  /// mistyped required keys, std::invalid_argument for inconsistent values (e.g. n_head not a
  /// multiple of n_head_kv).
  static HParams from_gguf(const gguf::File& f);
};

/// One batch of tokens for a forward pass, possibly of several sequences. All are I32 inputs
/// created in the graph's context; the KV cache (runtime/kv_cache.h) supplies the block table.
struct Batch {
  Tensor* tokens = nullptr;    ///< [n_tokens] token ids
  Tensor* pos = nullptr;       ///< [n_tokens] each token's position in its sequence (RoPE, causal mask)
  Tensor* seq = nullptr;       ///< [n_tokens] each token's sequence: its row of the KV block table
  Tensor* cells = nullptr;     ///< [n_tokens] the KV cells the tokens' keys and values are written to
  Tensor* out_rows = nullptr;  ///< [n_out] which batch rows produce logits
};

/// A model: hyper-parameters, weights, and a graph builder. The same builder serves prefill
/// (n tokens), decode (1 token) and speculative verification (d + 1 tokens).
class Model {
 public:
  virtual ~Model() = default;
  const HParams& hparams() const { return hp_; }
  const Weights& weights() const { return *weights_; }

  /// Records the forward pass for `batch` over the KV cache `kv` in `ctx`: writes the batch's keys
  /// and values at batch.cells, lets each token attend to its own sequence's positions 0..pos, and
  /// returns logits f32 [n_vocab, n_out] for batch.out_rows.
  virtual Tensor* build(Context& ctx, const Batch& batch, KvCache& kv) const = 0;

 protected:
  Model(HParams hp, std::unique_ptr<Weights> w) : hp_(std::move(hp)), weights_(std::move(w)) {}
  HParams hp_;
  std::unique_ptr<Weights> weights_;
};

}  // namespace minfer
