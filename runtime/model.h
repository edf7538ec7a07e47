// The model interface that model definition files (models/<arch>/) implement, and the
// hyper-parameters read from GGUF metadata.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ops/rope.h"
#include "runtime/weights.h"
#include "tensor/context.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

class KvCache;

/// RoPE context-extension methods (GGUF `<arch>.rope.scaling.type`).
enum class RopeScaling : int32_t { NONE, LINEAR, YARN };

/// "none", "linear", "yarn" -> RopeScaling; std::nullopt otherwise.
std::optional<RopeScaling> rope_scaling_from_name(std::string_view name);
std::string_view rope_scaling_name(RopeScaling s);

/// llama.cpp's RoPE flags (--rope-scaling, --rope-scale, --rope-freq-base, --rope-freq-scale,
/// --yarn-orig-ctx, --yarn-ext-factor, --yarn-attn-factor, --yarn-beta-slow, --yarn-beta-fast):
/// each set field replaces the matching HParams value.
struct RopeOverrides {
  std::optional<RopeScaling> scaling;      ///< -> rope_scaling
  std::optional<float> scale;              ///< the factor: rope_freq_scale = 1 / scale
  std::optional<float> freq_base;          ///< -> rope_freq_base
  std::optional<float> freq_scale;         ///< -> rope_freq_scale (wins over `scale`)
  std::optional<int32_t> yarn_orig_ctx;    ///< -> rope_n_ctx_orig
  std::optional<float> yarn_ext_factor;    ///< -> yarn_ext_factor
  std::optional<float> yarn_attn_factor;   ///< -> yarn_attn_factor
  std::optional<float> yarn_beta_slow;     ///< -> yarn_beta_slow
  std::optional<float> yarn_beta_fast;     ///< -> yarn_beta_fast
  bool any() const {
    return scaling || scale || freq_base || freq_scale || yarn_orig_ctx || yarn_ext_factor || yarn_attn_factor ||
           yarn_beta_slow || yarn_beta_fast;
  }
};

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
  ops::RopeMode rope_mode = ops::RopeMode::NEOX;  ///< the architecture's (from_gguf's argument)
  // Mixture of experts (0 for dense models).
  int32_t n_expert = 0;       ///< expert_count
  int32_t n_expert_used = 0;  ///< expert_used_count: experts per token (top-k)
  int32_t n_ff_exp = 0;       ///< expert_feed_forward_length: rows of one expert's gate/up

  // RoPE scaling (llama.cpp's keys and defaults; ops/rope.h has the formulas). Llama 3's
  // frequency factors are a tensor, rope_freqs.weight, that the model file passes to the rope op.
  RopeScaling rope_scaling = RopeScaling::NONE;  ///< rope.scaling.type: none, linear, yarn
  float rope_freq_scale = 1.0f;  ///< 1 / rope.scaling.factor (old key rope.scale_linear)
  int32_t rope_n_ctx_orig = 0;   ///< rope.scaling.original_context_length (default n_ctx_train)
  float rope_attn_factor = 1.0f; ///< rope.scaling.attn_factor: multiplies the rope magnitude
  float yarn_ext_factor = -1.0f; ///< rope.scaling.yarn_ext_factor; < 0: 1 for yarn, else 0
  float yarn_attn_factor = 0.0f; ///< rope.scaling.yarn_attn_factor (Transformers' attention_factor);
                                 ///< <= 0: yarn_mscale(factor) with YaRN, else 1
  float yarn_beta_fast = 32.0f;  ///< rope.scaling.yarn_beta_fast
  float yarn_beta_slow = 1.0f;   ///< rope.scaling.yarn_beta_slow

  /// Reads the llama-style keys for `general.architecture`. `rope_mode` is the architecture's
  /// RoPE pairing, which GGUF does not record: the model definition says it (NEOX for
  /// Transformers' rotate_half as converted, NORMAL for Llama, whose converter permutes wq / wk).
  /// Throws gguf::Error for missing or mistyped required keys, std::invalid_argument for
  /// inconsistent values (e.g. n_head not a multiple of n_head_kv; context_length or a head dim
  /// outside [1, INT32_MAX]; expert_used_count without expert_count; more tokenizer.ggml.tokens
  /// than token_embd.weight rows) and for an unsupported rope.scaling.type.
  static HParams from_gguf(const gguf::File& f, ops::RopeMode rope_mode);

  /// The rope op's parameters for these hyper-parameters (as llama.cpp's context resolves them):
  ///   none:   freq_scale 1, no YaRN;  linear: freq_scale = rope_freq_scale
  ///   yarn:   freq_scale = rope_freq_scale, ext_factor 1 (or yarn_ext_factor), n_ctx_orig,
  ///           beta_fast / beta_slow
  ///   attn_factor = rope_attn_factor * (yarn_attn_factor > 0 ? yarn_attn_factor
  ///                                    : ext_factor != 0 ? yarn_mscale(1 / freq_scale) : 1)
  ops::RopeParams rope_params() const;

  /// Applies llama.cpp-style RoPE flags; unset fields keep the GGUF's values. Throws
  /// std::invalid_argument for values the rope op cannot take (non-positive scale or base, ...).
  void apply(const RopeOverrides& o);
  /// Throws std::invalid_argument when rope_params() are not valid for the rope op.
  void check_rope() const;

  /// What one rank of `shard` computes: n_head, n_head_kv and n_ff divided by shard.n (the
  /// column-parallel split of q/k/v and gate/up). n_vocab and n_expert stay whole (a rank's
  /// vocabulary rows and experts are its Weights parts; the logits are gathered whole, the router
  /// is replicated) but must divide too. Throws std::invalid_argument naming the value that is
  /// not a multiple of shard.n.
  HParams for_shard(const Shard& shard) const;
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
  /// Applies RoPE overrides to the hyper-parameters (HParams::apply). Graphs read them when
  /// built: call before creating sessions.
  void override_rope(const RopeOverrides& o) { hp_.apply(o); }
  const Weights& weights() const { return *weights_; }

  /// Records the forward pass for `batch` over the KV cache `kv` in `ctx`: writes the batch's keys
  /// and values at batch.cells, lets each token attend to its own sequence's positions 0..pos, and
  /// returns logits f32 [n_vocab, n_out] for batch.out_rows.
  virtual Tensor* build(Context& ctx, const Batch& batch, KvCache& kv) const = 0;

 protected:
  /// hp: the file's hyper-parameters; a sharded `w` (Weights::shard) makes hparams() this rank's
  /// (HParams::for_shard), which the KV cache and the attention blocks are sized by.
  Model(HParams hp, std::unique_ptr<Weights> w) : hp_(hp.for_shard(w->shard())), weights_(std::move(w)) {}
  HParams hp_;
  std::unique_ptr<Weights> weights_;
};

}  // namespace minfer
