// Reading a tokenizer Vocab from GGUF metadata.
//
// Keys (ggml docs/gguf.md "Tokenizer"; llama.cpp llama-vocab.cpp for how they are used):
//   tokenizer.ggml.model        string, required ("gpt2")
//   tokenizer.ggml.pre          string, required for gpt2 ("qwen2", "llama-bpe")
//   tokenizer.ggml.tokens       string array, required
//   tokenizer.ggml.token_type   i32 array, optional (absent: all normal)
//   tokenizer.ggml.merges       string array, required for gpt2
//   tokenizer.ggml.bos_token_id / eos_token_id / padding_token_id / eot_token_id / eom_token_id
//                               u32, optional
//   tokenizer.ggml.add_bos_token bool, optional (absent: true for llama-bpe, else false, as llama.cpp)
//   tokenizer.chat_template     string, optional
//   general.architecture        string, optional (kept for chat style selection)
#pragma once

#include "tokenizer/vocab.h"

namespace minfer::gguf {
class File;
}

namespace minfer::tokenizer {

/// The vocabulary stored in `file`. Throws gguf::Error for a missing required key or a value of
/// the wrong type (the message names the key), std::invalid_argument for a missing pre-tokenizer
/// name. The result is not validated further here; the Tokenizer constructor does that.
Vocab vocab_from_gguf(const gguf::File& file);

}  // namespace minfer::tokenizer
