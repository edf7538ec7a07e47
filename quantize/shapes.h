// Model shapes for minfer-mkmodel: the hyper-parameters of real Qwen2.5 / Qwen3 / Llama 3.1
// checkpoints (from their Hugging Face config.json files, the -Instruct variants) or custom
// dimensions, and the tensor list llama.cpp's converter (convert_hf_to_gguf.py) writes for them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::quantize {

struct ModelShape {
  std::string name = "custom";   ///< shape name ("qwen2.5-0.5b") or "custom"
  std::string display_name;      ///< general.name ("Qwen2.5 0.5B Instruct (random weights)")
  std::string arch = "qwen2";    ///< "qwen2" (q/k/v bias), "qwen3" (q/k RMSNorm), "qwen3moe" (+ experts) or "llama" (neither)
  int32_t n_embd = 0;            ///< hidden_size
  int32_t n_layer = 0;           ///< num_hidden_layers
  int32_t n_head = 0;            ///< num_attention_heads
  int32_t n_head_kv = 0;         ///< num_key_value_heads
  int32_t head_dim = 0;          ///< head_dim (0: n_embd / n_head)
  int32_t n_ff = 0;              ///< intermediate_size
  int32_t n_vocab = 0;           ///< vocab_size (rows of token_embd)
  int32_t n_ctx_train = 32768;   ///< max_position_embeddings
  bool tied = false;             ///< tie_word_embeddings (no output.weight)
  float rope_freq_base = 1e6f;   ///< rope_theta
  float rms_eps = 1e-6f;         ///< rms_norm_eps
  /// Llama 3.1's rope_scaling (rope_type "llama3"): factor (0: none), low_freq_factor,
  /// high_freq_factor, original_max_position_embeddings. The converter writes it as the
  /// rope_freqs.weight tensor (llama3_rope_freqs), not as keys; llama only.
  float llama3_factor = 0.0f;
  float llama3_low_freq = 1.0f;
  float llama3_high_freq = 4.0f;
  int32_t llama3_n_ctx_orig = 8192;
  int32_t n_expert = 0;          ///< num_experts (qwen3moe)
  int32_t n_expert_used = 0;     ///< num_experts_per_tok (qwen3moe)
  int32_t n_ff_exp = 0;          ///< moe_intermediate_size (qwen3moe)

  int32_t head_dim_or_default() const { return head_dim > 0 ? head_dim : (n_head > 0 ? n_embd / n_head : 0); }
  /// Throws std::invalid_argument naming the first bad field: an unknown arch, a non-positive
  /// dimension, n_head not a multiple of n_head_kv, n_embd not a multiple of n_head without an
  /// explicit head_dim, an odd head_dim (RoPE rotates pairs), or any row length (n_embd, n_ff,
  /// n_head * head_dim, n_ff_exp) that is not a multiple of `row_block`: 32, the smallest quantization
  /// block, for quantized files; 1 for float (f32/f16/bf16) files, which have no blocks.
  /// qwen3moe also needs n_expert > 0, n_expert_used in [1, n_expert] and n_ff_exp > 0.
  void validate(int64_t row_block = 32) const;
  /// Parameter count as Hugging Face counts it (the tied embedding once; rope_freqs, computed
  /// from the config, is no parameter).
  int64_t n_params() const;
};

/// The named shapes: qwen2.5-0.5b, qwen2.5-7b, qwen2.5-14b, qwen3-0.6b, qwen3-8b, qwen3-30b-a3b, llama3.1-8b.
const std::vector<ModelShape>& named_shapes();

/// The named shape `name` (case-insensitive). Throws std::invalid_argument listing the names.
const ModelShape& find_shape(std::string_view name);

/// What a generated tensor holds.
enum class Fill {
  normal,  ///< N(0, stddev) weights
  ones,    ///< RMSNorm weights
  bias,    ///< small random biases
  values,  ///< ShapeTensor::values (computed, e.g. rope_freqs)
};

struct ShapeTensor {
  std::string name;
  std::vector<int64_t> ne;  ///< ggml order
  Fill fill = Fill::normal;
  std::vector<float> values;  ///< Fill::values: every element, row after row
};

/// The tensors of `s` in the converter's order: rope_freqs (llama with llama3_factor > 0, f32
/// [head_dim / 2]), token_embd, then per block attn_norm, ffn_down,
/// ffn_gate, ffn_up, ffn_norm, attn_k(+bias | _norm), attn_output, attn_q(+bias | _norm), attn_v
/// (+bias), then output_norm and (untied) output. Shapes: attn_q [n_embd, n_head*head_dim],
/// attn_k/v [n_embd, n_head_kv*head_dim], attn_output [n_head*head_dim, n_embd], ffn_gate/up
/// [n_embd, n_ff], ffn_down [n_ff, n_embd], token_embd/output [n_embd, n_vocab], q/k norms
/// [head_dim]. qwen3moe has, in place of ffn_down/gate/up, ffn_down_exps [n_ff_exp, n_embd,
/// n_expert], ffn_gate_exps and ffn_up_exps [n_embd, n_ff_exp, n_expert] and the router
/// ffn_gate_inp [n_embd, n_expert] (before ffn_norm, as the converter writes them).
std::vector<ShapeTensor> shape_tensors(const ModelShape& s);

/// Llama 3's RoPE frequency factors as the converter computes them (LlamaModel.generate_extra_tensors,
/// Transformers' _compute_llama3_parameters): for pair k with theta_k = base^(-2k / head_dim) and
/// wavelength w = 2 pi / theta_k, 1 where w < n_ctx_orig / high_freq, factor where w > n_ctx_orig /
/// low_freq, else 1 / ((1 - s) / factor + s) with s = (n_ctx_orig / w - low_freq) / (high_freq -
/// low_freq). The rope op divides theta_k by it. -> [head_dim / 2].
std::vector<float> llama3_rope_freqs(const ModelShape& s);

/// gguf-py's size label ("494M", "7.6B"): Model.model_weight_count_rounded_notation.
std::string size_label(int64_t n_params);

}  // namespace minfer::quantize
