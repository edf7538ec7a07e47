// GGUF -> GGUF quantization (what llama-quantize does, for the mixes of quantize/ftype.h).
//
//   minfer::quantize::QuantizeParams p;
//   p.target = minfer::quantize::parse_target("Q4_K_M");
//   auto summary = minfer::quantize::quantize_file("model-f16.gguf", "model-Q4_K_M.gguf", p,
//       [](const TensorReport& r) { fputs(format_tensor_line(r).c_str(), stderr); });
//
// Output: every KV of the input in its order, then general.quantization_version = 2 (ggml's
// GGML_QNT_VERSION) and general.file_type = the target's llama_ftype id, moved to the end as
// llama-quantize's gguf_set_val_* does (so K-quant outputs are byte-identical to its files); the
// split.* keys removed.
// Tensors in llama.cpp's order (quantize/recipe.h), each either copied byte for byte (same dtype)
// or converted row by row: rows are widened to f32 (F16/BF16/block types; block types only with
// allow_requantize) and encoded with quantize_row on a thread pool, then streamed to the file, so
// no tensor is ever held whole in memory.
#pragma once

#include <filesystem>
#include <vector>

#include "quantize/ftype.h"
#include "quantize/recipe.h"
#include "quantize/report.h"

namespace minfer::gguf {
class File;
}

namespace minfer::quantize {

struct QuantizeParams {
  QuantTarget target;
  int n_threads = 0;              ///< <= 0: all hardware threads
  bool allow_requantize = false;  ///< allow block-type inputs (llama-quantize --allow-requantize)
};

/// The tensors of `f` as TensorDescs, in file order.
std::vector<TensorDesc> tensor_descs(const gguf::File& f);

/// The decision for every tensor of `f` (file order), as quantize_file would make it.
/// Throws like plan_types, and gguf::Error for missing architecture keys.
std::vector<TensorPlan> plan_file(const gguf::File& f, const QuantTarget& target);

/// Quantizes `in` into `out` (written as a new out.XXXXXX, then renamed). `on_tensor` is called after each
/// tensor. Throws gguf::Error for an unreadable/invalid input or an unwritable output,
/// std::invalid_argument for a bad target (e.g. a block-type input without allow_requantize,
/// naming the tensor and its dtype) and std::runtime_error naming the tensor and row when a row
/// cannot be encoded (inf/NaN). On failure no `out` file is left behind.
Summary quantize_file(const std::filesystem::path& in, const std::filesystem::path& out,
                      const QuantizeParams& params, const TensorCallback& on_tensor = nullptr);

}  // namespace minfer::quantize
