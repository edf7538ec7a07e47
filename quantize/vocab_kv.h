// Tokenizer metadata for generated models: a copy of a real vocabulary padded to the model's
// n_vocab, or a small synthetic byte-level BPE vocabulary. Keys as llama.cpp's converter writes
// them (gguf-py SpecialVocab / GGUFWriter.add_tokenizer_*; ggml docs/gguf.md "Tokenizer").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace minfer::gguf {
class File;
class Writer;
}  // namespace minfer::gguf

namespace minfer::quantize {

/// llama_token_type ids stored in tokenizer.ggml.token_type.
inline constexpr int32_t kTokenNormal = 1;
inline constexpr int32_t kTokenControl = 3;
inline constexpr int32_t kTokenUnused = 5;

/// Copies every `tokenizer.*` key of `src` into `w`, in src's order. When src holds fewer than
/// `n_vocab` tokens, the token list is padded with "[PAD{id}]" entries of type UNUSED (and
/// tokenizer.ggml.scores, if any, with 0), as convert_hf_to_gguf.py pads Qwen's 151665-token
/// vocabulary to its 151936/152064 embedding rows. Throws std::invalid_argument when src has no
/// tokenizer.ggml.tokens or more than n_vocab tokens, or when token_type/scores lengths differ
/// from the token count.
void copy_vocab(gguf::Writer& w, const gguf::File& src, int32_t n_vocab);

/// A byte-level BPE vocabulary of exactly n_vocab tokens that minfer's and llama.cpp's gpt2/qwen2
/// tokenizers load: ids 0..255 are the 256 byte tokens (GPT-2 byte-level alphabet, byte order),
/// then filler tokens made by merges (every pair of 95 printable ASCII characters, then pairs of
/// those pairs, most common letters first), and the last three ids are "<|endoftext|>",
/// "<|im_start|>", "<|im_end|>" (control). bos = pad = <|endoftext|>, eos = <|im_end|>.
struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;
  int32_t bos_id = -1, eos_id = -1, pad_id = -1;
};

/// Throws std::invalid_argument when n_vocab < 259 (bytes + specials) or above the 81 million
/// tokens the filler scheme can make.
SyntheticVocab synthetic_vocab(int32_t n_vocab);

/// Writes the synthetic vocabulary's keys (model gpt2, pre qwen2, tokens, token_type, merges,
/// special ids, add_bos_token false, a ChatML chat_template).
void write_synthetic_vocab(gguf::Writer& w, int32_t n_vocab);

/// The GPT-2 byte-level alphabet: the UTF-8 text that stands for byte b in token strings.
std::string byte_to_token_text(uint8_t b);

}  // namespace minfer::quantize
