// The model-side toolkit: the building blocks of a pre-norm decoder-only transformer, made of
// library ops, that a model definition (models/<arch>/) composes the way Transformers' modeling
// files compose their modules (LlamaRMSNorm, LlamaAttention, LlamaMLP, embed_tokens, lm_head).
//
// Each block loads its weights by GGUF name (llama.cpp's converter names: blk.<il>.attn_q, ...)
// and records its forward pass in basic ops (matmul, add, rms_norm, rope, kv_store, attention,
// swiglu); a backend with fused kernels finds their patterns when it rewrites the graph
// (Backend::rewrite), so nothing here names a fused op. What differs between families (q/k/v
// bias, q/k RMSNorm, RoPE mode and frequency factors, head dims, tied output) is data in the
// block, not a branch in an op.
//
// Shapes follow tensor/tensor.h: ne[0] innermost, hidden states f32 [n_embd, n_tokens].
// Loading checks every tensor's shape against the hyper-parameters (llama.cpp's
// check_tensor_dims) and throws what Weights::get throws: a message naming the missing or
// misshapen tensor, the expected and the found shape, and the file. The HParams the load
// functions take are the file's (the model constructor's argument): with tensor parallelism,
// shapes are checked on the whole tensors, before a rank's split, while hparams() are the rank's.
#pragma once

#include <string>
#include <string_view>

#include "ops/rope.h"
#include "runtime/model.h"
#include "runtime/weights.h"
#include "tensor/context.h"

namespace minfer {
class KvCache;
}

namespace minfer::models {

/// The GGUF name of a block tensor: blk_name(3, "attn_q") == "blk.3.attn_q.weight",
/// blk_name(3, "attn_q", "bias") == "blk.3.attn_q.bias".
std::string blk_name(int il, std::string_view name, std::string_view kind = "weight");

/// x + h (ops::add), for the residual connections of the blocks below.
Tensor* residual_add(Context& ctx, Tensor* x, Tensor* h);

/// RMSNorm with a learned scale (Transformers' LlamaRMSNorm, Qwen2RMSNorm):
/// y = x / sqrt(mean(x^2) + eps) * weight over dim 0.
struct RmsNorm {
  Tensor* weight = nullptr;  ///< f32 [n]
  float eps = 1e-6f;         ///< the file's attention.layer_norm_rms_epsilon

  /// weight = the tensor `name` (required), f32 [n].
  static RmsNorm load(Weights& W, std::string_view name, int64_t n, float eps);
  /// x: f32 [n, n_tokens] -> f32 [n, n_tokens].
  Tensor* forward(Context& ctx, Tensor* x) const;
};

/// What varies between the attention blocks of the supported families. Every field is a fact of
/// the architecture (its modeling code), not of one file.
struct AttentionSpec {
  bool qkv_bias = false;  ///< q/k/v projections carry biases attn_{q,k,v}.bias (Qwen2)
  bool qk_norm = false;   ///< per-head RMSNorm of q and k before RoPE, attn_{q,k}_norm (Qwen3)
};

/// The per-graph parameters of an attention block. Built from the hyper-parameters when a graph
/// is built (never cached in the constructor): RoPE overrides (Model::override_rope) change
/// HParams after loading.
struct AttentionParams {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;    ///< attention.key_length (q and k)
  int32_t head_dim_v = 0;  ///< attention.value_length
  ops::RopeParams rope;    ///< HParams::rope_params: the model's mode, the GGUF's scaling, the overrides
  float norm_eps = 1e-6f;  ///< q_norm / k_norm epsilon (the model's RMSNorm one)
  float kq_scale = 0;      ///< the score scale: 1 / sqrt(head_dim), as Transformers' `scaling`

  /// Heads, head dims, RoPE (mode, base, scaling) and rms_eps from `h`; kq_scale 1 / sqrt(head_dim).
  static AttentionParams from(const HParams& h);
};

/// Grouped-query self-attention over the paged KV cache (Transformers' LlamaAttention and its
/// relatives): q/k/v projections (+ optional bias), optional q/k RMSNorm, RoPE (with optional
/// frequency factors), the KV-cache store, causal attention, the output projection.
struct Attention {
  /// wq|wk|wv: one concatenated tensor's row views when their dtypes match (one matmul), else
  /// three tensors: [n_embd, n_head * head_dim], [n_embd, n_head_kv * head_dim] (k and v).
  Tensor* wq = nullptr;
  Tensor* wk = nullptr;
  Tensor* wv = nullptr;
  Tensor* bq = nullptr;  ///< optional biases (Qwen2), f32 [rows of the matching weight]
  Tensor* bk = nullptr;
  Tensor* bv = nullptr;
  Tensor* q_norm = nullptr;  ///< optional per-head RMSNorm weights (Qwen3), f32 [head_dim]
  Tensor* k_norm = nullptr;
  Tensor* rope_freqs = nullptr;  ///< optional RoPE frequency factors (Llama 3), f32 [n_rot / 2]
  Tensor* wo = nullptr;          ///< attn_output [n_head * head_dim_v, n_embd]
  /// The tensor-parallel rank this block is (Weights::shard): with a split shard, the weights
  /// above are the rank's heads (q/k/v rows, attn_output columns), the KV caches its own, and the
  /// output projection is summed over the ranks (ops::all_reduce).
  Shard shard;

  /// Loads block il's attn_q, attn_k, attn_v, attn_output, and the biases / q,k norms that
  /// `spec` names (all required when named), of the shapes above for the heads and head dims of
  /// `h`. rope_freqs: optional f32 [n_rot / 2] frequency factors shared by every layer (Llama
  /// 3's rope_freqs.weight; theta_k is divided by factor k).
  static Attention load(Weights& W, int il, const HParams& h, const AttentionSpec& spec, Tensor* rope_freqs = nullptr);

  /// x: the normed hidden states f32 [n_embd, n_tokens]. Writes the batch's keys and values into
  /// layer il of `kv` at b.cells, lets each token attend to its own sequence's positions 0..pos,
  /// and returns the output projection f32 [n_embd, n_tokens] (the residual is the caller's).
  Tensor* forward(Context& ctx, Tensor* x, const Batch& b, KvCache& kv, int il, const AttentionParams& p) const;

  /// What forward() feeds the attention: the q/k/v projections (+ bias, + q/k RMSNorm), RoPE of
  /// q and k at `pos`, and the stores of k and v into the caches ([head_dim, n_head_kv, n_cells])
  /// at `cells`. q: f32 [head_dim, n_head, n_tokens]; k_store / v_store alias the caches.
  struct Projected {
    Tensor* q;
    Tensor* k_store;
    Tensor* v_store;
  };
  Projected project(Context& ctx, Tensor* x, Tensor* pos, Tensor* cells, Tensor* k_cache, Tensor* v_cache,
                    const AttentionParams& p) const;
};

/// An index space (the vocabulary, the experts) split in equal ranges over the ranks of a Shard,
/// as Megatron's VocabParallelEmbedding splits the vocabulary and vLLM's expert_map the experts:
/// rank r of n holds the global indices [r * size / n, (r + 1) * size / n). Two per-rank tables
/// turn global indices into the rank's in the graph (two get_rows): no op knows about ranks.
struct ShardRange {
  Tensor* local = nullptr;  ///< I32 [1, size]: index - r * size / n inside the range, 0 outside
  Tensor* mask = nullptr;   ///< f32 [1, size]: 1 inside the range, 0 outside

  /// The tables of W.shard()'s range of `size` indices (size a multiple of the shard count,
  /// HParams::for_shard checked it), W.constant()s named `name`.local / `name`.mask.
  static ShardRange load(Weights& W, std::string_view name, int64_t size);

  struct Lookup {
    Tensor* ids;   ///< I32 of the ids' shape: the local index, 0 (a valid one) for another rank's
    Tensor* mask;  ///< f32 [1, ids->ne[0], ids->ne[1]]: 1 for this rank's ids, 0 for the others'
  };
  /// ids: contiguous I32 [n] or [n, b] of global indices in [0, size).
  Lookup lookup(Context& ctx, Tensor* ids) const;
};

/// The SwiGLU MLP (Transformers' LlamaMLP): down(silu(gate(x)) * up(x)).
struct SwiGluFfn {
  Tensor* gate = nullptr;  ///< ffn_gate [n_embd, n_ff] } one concatenated tensor's row views
  Tensor* up = nullptr;    ///< ffn_up   [n_embd, n_ff] } when their dtypes match (one matmul)
  Tensor* down = nullptr;  ///< ffn_down [n_ff, n_embd]
  /// The tensor-parallel rank (Weights::shard): with a split shard, gate/up are the rank's rows,
  /// down its columns, and the output is summed over the ranks.
  Shard shard;

  /// Loads block il's ffn_gate, ffn_up, ffn_down of h.n_embd and h.n_ff (the rank's parts when
  /// Weights::shard is split).
  static SwiGluFfn load(Weights& W, int il, const HParams& h);
  /// x: f32 [n_embd, n_tokens] -> f32 [n_embd, n_tokens].
  Tensor* forward(Context& ctx, Tensor* x) const;
};

/// A sparse mixture-of-experts FFN (Transformers' Qwen3MoeSparseMoeBlock, llama.cpp's
/// build_moe_ffn with softmax gating): the router picks k of n_expert SwiGLU experts per token,
/// their outputs are summed with the softmax weights of the picked experts (renormalized to sum 1
/// when `norm_topk_prob`). Ops: mul_mat, top_k, get_rows, soft_max, mul_mat_id, swiglu, mul, add
/// (docs/moe.md).
///
/// Tensor parallelism splits by expert: a rank holds n_expert / N whole experts, the router is
/// replicated, so every rank picks the same k experts and weights per token. A rank maps the
/// picked ids to its own (ShardRange), computes every slot with the mapped ids (another rank's
/// expert becomes its local expert 0, a valid read) and zeroes the weights of the slots it does
/// not hold; the all-reduce sums the ranks' contributions.
struct MoeFfn {
  Tensor* router = nullptr;     ///< ffn_gate_inp [n_embd, n_expert]
  Tensor* gate_exps = nullptr;  ///< ffn_gate_exps [n_embd, n_ff_exp, n_expert / N]
  Tensor* up_exps = nullptr;    ///< ffn_up_exps [n_embd, n_ff_exp, n_expert / N]
  Tensor* down_exps = nullptr;  ///< ffn_down_exps [n_ff_exp, n_embd, n_expert / N]
  int32_t k = 0;                ///< experts per token (expert_used_count)
  bool norm_topk_prob = true;
  Shard shard;                  ///< Weights::shard: with a split shard, the experts are the rank's
  ShardRange experts;           ///< the rank's expert ids (split shards only)

  /// Loads block il's router and expert tensors (the rank's experts when Weights::shard is
  /// split); throws std::invalid_argument when the file's expert_count /
  /// expert_feed_forward_length are missing, std::runtime_error (Weights::get) when a tensor has
  /// another shape than the above (with N = 1).
  static MoeFfn load(Weights& W, int il, const HParams& h, bool norm_topk_prob);
  /// x: f32 [n_embd, n_tokens] -> f32 [n_embd, n_tokens].
  Tensor* forward(Context& ctx, Tensor* x) const;
};

/// One pre-norm decoder layer, as Transformers' LlamaDecoderLayer / Qwen2DecoderLayer:
///   x = x + self_attn(input_layernorm(x));  x = x + mlp(post_attention_layernorm(x)).
/// Mlp: SwiGluFfn or MoeFfn (anything with forward(ctx, x) -> [n_embd, n_tokens]).
template <typename Mlp>
struct DecoderLayer {
  RmsNorm input_layernorm, post_attention_layernorm;  ///< blk.il.attn_norm, blk.il.ffn_norm
  Attention self_attn;
  Mlp mlp;

  /// Loads block il's norms (f32 [n_embd], epsilon h.rms_eps) and attention (Attention::load)
  /// around an already loaded `mlp`.
  static DecoderLayer load(Weights& W, int il, const HParams& h, const AttentionSpec& spec, Mlp mlp,
                           Tensor* rope_freqs = nullptr) {
    return {RmsNorm::load(W, blk_name(il, "attn_norm"), h.n_embd, h.rms_eps),
            RmsNorm::load(W, blk_name(il, "ffn_norm"), h.n_embd, h.rms_eps), Attention::load(W, il, h, spec, rope_freqs),
            std::move(mlp)};
  }
  /// x: f32 [n_embd, n_tokens] -> f32 [n_embd, n_tokens]; Attention::forward's cache semantics.
  Tensor* forward(Context& ctx, Tensor* x, const Batch& b, KvCache& kv, int il, const AttentionParams& p) const {
    x = residual_add(ctx, x, self_attn.forward(ctx, input_layernorm.forward(ctx, x), b, kv, il, p));
    return residual_add(ctx, x, mlp.forward(ctx, post_attention_layernorm.forward(ctx, x)));
  }
};

/// Token embedding (Transformers' embed_tokens): token_embd.weight [n_embd, n_vocab], any dtype.
/// Tensor parallelism splits it by vocabulary rows (Megatron's VocabParallelEmbedding): a rank
/// holds n_vocab / N rows, looks up the tokens of its range (ShardRange), zeroes the others', and
/// the all-reduce sums the ranks' rows (one rank's row plus zeros: the unsharded row's bits).
struct Embedding {
  Tensor* weight = nullptr;  ///< [n_embd, n_vocab / N]
  Shard shard;               ///< Weights::shard
  ShardRange vocab;          ///< the rank's token ids (split shards only)

  /// token_embd.weight [h.n_embd, h.n_vocab] (the rank's rows when Weights::shard is split).
  static Embedding load(Weights& W, const HParams& h);
  /// tokens: I32 [n_tokens] -> f32 [n_embd, n_tokens].
  Tensor* forward(Context& ctx, Tensor* tokens) const;
};

/// The model's end: the final RMSNorm (output_norm) and the LM head (output.weight), applied only
/// to the rows that need logits. Tied embeddings (tie_word_embeddings: the converter writes no
/// output.weight) project with the token embedding. Tensor parallelism splits the head by
/// vocabulary rows (a tied head is the split embedding): a rank computes the logits of its
/// n_vocab / N tokens and ops::all_gather joins them in rank order, the whole logits on every rank.
struct LmHead {
  RmsNorm norm;              ///< output_norm
  Tensor* output = nullptr;  ///< output.weight, or the token embedding when tied: [n_embd, n_vocab / N]
  Shard shard;               ///< Weights::shard

  /// output_norm.weight (required, f32 [n_embd], epsilon h.rms_eps) and output.weight
  /// [n_embd, n_vocab] (the rank's rows when split), or `tok_embd` when the file has none.
  static LmHead load(Weights& W, const HParams& h, const Embedding& tok_embd);
  /// x: f32 [n_embd, n_tokens]; out_rows: I32 [n_out] rows of x -> logits f32 [n_vocab, n_out].
  Tensor* forward(Context& ctx, Tensor* x, Tensor* out_rows) const;
};

}  // namespace minfer::models
