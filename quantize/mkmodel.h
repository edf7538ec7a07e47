// Random-weight models of real shapes, written as the GGUF llama.cpp's converter + llama-quantize
// would produce for them: converter metadata (general.*, <arch>.*, tokenizer.*), converter tensor
// order, dtypes from the same mix recipe as quantize_file.
//
// Weights: N(0, stddev) (approximate, quantize/random.h), RMSNorm weights 1, biases N(0, stddev).
// Every row comes from its own (seed, tensor, row) stream and is generated and quantized on a
// thread pool right before it is streamed to the file: memory stays at a few buffers whatever
// the model size, and the bytes do not depend on the thread count.
#pragma once

#include <cstdint>
#include <filesystem>

#include "quantize/ftype.h"
#include "quantize/report.h"
#include "quantize/shapes.h"

namespace minfer::quantize {

struct MakeModelParams {
  ModelShape shape;                ///< validated by make_model
  QuantTarget target = parse_target("Q4_K_M");
  std::filesystem::path vocab;     ///< a GGUF whose tokenizer.* keys are copied; empty: synthetic
  uint64_t seed = 0;
  int n_threads = 0;               ///< <= 0: all hardware threads
  float stddev = 0.02f;
};

/// Writes the model to `out` (a new out.XXXXXX, then renamed). Metadata in the converter's order:
/// general.architecture, general.type, general.name, general.size_label, <arch>.block_count,
/// context_length, embedding_length, feed_forward_length, attention.head_count,
/// attention.head_count_kv, rope.freq_base, attention.layer_norm_rms_epsilon,
/// attention.key_length / value_length (qwen3, or any head_dim other than n_embd / n_head),
/// general.file_type, general.quantization_version, then the tokenizer keys.
/// Throws std::invalid_argument for a bad shape or vocabulary, gguf::Error for an unreadable
/// vocab file or an unwritable output. `on_tensor` is called after each tensor.
Summary make_model(const MakeModelParams& p, const std::filesystem::path& out,
                   const TensorCallback& on_tensor = nullptr);

/// The row-length multiple a target needs (ModelShape::validate): 1 for f32/f16/bf16 files,
/// 32 (the smallest quantization block) otherwise.
int64_t row_block_for(const QuantTarget& t);

}  // namespace minfer::quantize
