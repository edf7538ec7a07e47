// The per-tensor dtype choice of llama.cpp's quantization mixes (llama-quantize).
//
// A faithful re-implementation of `llama_tensor_get_type` and its helpers in llama.cpp
// src/llama-quant.cpp (tensor_allows_quantization, tensor_get_category, the mix rules,
// tensor_type_fallback), restricted to the non-IQ mixes of quantize/ftype.h and without an
// importance matrix. docs/quants.md "Quantization mixes" lists the rules.
//
// The rules keep running counters (the i-th attn_v, the i-th ffn_down), so the order in which
// tensors are visited matters: plan_types visits them in llama.cpp's order (llama_tensor_less:
// tensors outside "blk.N." first, then by block index, then by name), whatever order they are
// given in.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "quantize/ftype.h"
#include "tensor/dtype.h"

namespace minfer::gguf {
class File;
}

namespace minfer::quantize {

/// The hyper-parameters the rules look at.
struct ModelInfo {
  std::string arch;        ///< general.architecture ("qwen2", "llama", "falcon", ...)
  int32_t n_layer = 0;     ///< <arch>.block_count
  int32_t n_head = 0;      ///< <arch>.attention.head_count
  int32_t n_head_kv = 0;   ///< <arch>.attention.head_count_kv (default n_head)
  int32_t n_expert = 0;    ///< <arch>.expert_count (default 0)

  /// Reads the keys above. Throws gguf::Error when general.architecture or block_count is
  /// missing or mistyped.
  static ModelInfo from_gguf(const gguf::File& f);
};

/// A tensor as the rules see it. ne in ggml order (ne[0] = row length), unused dims 1.
struct TensorDesc {
  std::string name;
  DType type = DType::F32;  ///< current dtype (kept by tensors that are not quantized)
  int64_t ne[4] = {1, 1, 1, 1};
};

/// llama.cpp's tensor order (llama_model_loader::weight_name_comparer): the block index parsed
/// from a "blk.%d." prefix (-1 without one) first, then the name.
bool llama_tensor_less(std::string_view a, std::string_view b);

/// ggml_n_dims: 1 + the index of the last dimension with more than one element.
int effective_n_dims(const TensorDesc& t);

/// tensor_allows_quantization: 2-D or higher, the name ends in "weight", and it is not a norm,
/// an expert router, a positional / token-type embedding or one of llama.cpp's small special
/// tensors. Everything else keeps its dtype.
bool allows_quantization(const TensorDesc& t);

/// One tensor's decision.
struct TensorPlan {
  DType type = DType::F32;  ///< the dtype to write
  bool fallback = false;    ///< the recipe's dtype did not fit the row length (see below)
};

/// The dtype of every tensor of `tensors` (result[i] belongs to tensors[i]) for `target`.
///   - tensors that do not allow quantization keep their dtype;
///   - for F32/F16/BF16 targets the others get that dtype;
///   - else the mix rules pick a dtype (or, when target.pure, the default dtype), then rows whose
///     length is not a multiple of its block size fall back: Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0,
///     Q5_K -> Q5_1, Q6_K -> Q8_0, and F16 when even that does not fit.
/// Throws std::invalid_argument naming the tensor when a 32-element dtype does not fit its row
/// length (llama.cpp defines no fallback there either).
std::vector<TensorPlan> plan_types(const QuantTarget& target, const ModelInfo& model,
                                   std::span<const TensorDesc> tensors);

}  // namespace minfer::quantize
