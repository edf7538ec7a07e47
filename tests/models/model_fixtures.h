// Loading fixture models and their Hugging Face references (fixtures/<model>/refs.json).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "quantize/mkmodel.h"
#include "runtime/model.h"
#include "tensor/backend.h"

namespace minfer::test {

struct RefCase {
  std::string prompt;
  std::vector<int32_t> ids;
  int32_t row_begin = 0, row_end = 0;  ///< prompt positions whose logits the file holds
  int32_t vocab = 0;
  std::vector<float> logits;           ///< [(row_end - row_begin) * vocab]
  std::vector<int32_t> greedy32;
};

/// The cases of fixtures/<model>/refs.json; empty when the fixtures are absent.
std::vector<RefCase> load_refs(const std::string& model_dir);

/// Opens a fixture GGUF (relative to the fixtures dir); nullptr when absent.
std::shared_ptr<const gguf::File> open_fixture(const std::string& relative);

/// quantize::make_model(p) written to a temporary file, opened and the file removed (the mapping
/// stays valid): a random-weight model of any shape for a test.
std::shared_ptr<const gguf::File> make_random_model(const quantize::MakeModelParams& p);

/// HParams::from_gguf of a minimal qwen2 GGUF (1 block, n_embd 64, 2 heads, context 4096, a
/// 4-row f32 token_embd) after `keys` has set or overwritten metadata keys. Throws what
/// from_gguf throws.
HParams minimal_qwen2_hparams(const std::function<void(gguf::Writer&)>& keys);

}  // namespace minfer::test
