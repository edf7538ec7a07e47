// Progress and summary records shared by quantize_file and make_model, and their text form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace minfer::quantize {

/// One tensor written (reported after its bytes reached the writer).
struct TensorReport {
  size_t index = 0;          ///< 0-based position in the output file
  size_t count = 0;          ///< tensors in the output file
  std::string name;
  std::vector<int64_t> ne;   ///< shape, ggml order
  DType from = DType::F32;   ///< input dtype (F32 for generated tensors)
  DType to = DType::F32;     ///< written dtype
  bool fallback = false;     ///< the recipe's dtype did not fit the row length
  size_t bytes_in = 0;       ///< input bytes (generated tensors: their f32 size)
  size_t bytes_out = 0;
  int64_t elements_done = 0;   ///< elements written so far, this tensor included
  int64_t elements_total = 0;  ///< elements of the whole file
};

using TensorCallback = std::function<void(const TensorReport&)>;

struct Summary {
  size_t n_tensors = 0;
  int n_fallback = 0;
  int64_t n_elements = 0;
  size_t bytes_in = 0;
  size_t bytes_out = 0;
  double seconds = 0;

  double bpw_in() const { return n_elements ? 8.0 * static_cast<double>(bytes_in) / static_cast<double>(n_elements) : 0; }
  double bpw_out() const { return n_elements ? 8.0 * static_cast<double>(bytes_out) / static_cast<double>(n_elements) : 0; }
};

/// "[  3/ 50] [#.........]  12% blk.0.attn_k.weight  [256 x 128]  f16 -> q4_K   0.06 MiB -> 0.02 MiB" (plus
/// " (fallback)" when the recipe's dtype did not fit).
std::string format_tensor_line(const TensorReport& r);

/// Two lines: sizes before and after with bits per weight, then tensor count, fallbacks, time.
std::string format_summary(const Summary& s, const char* before_label = "model size",
                           const char* after_label = "quant size");

}  // namespace minfer::quantize
