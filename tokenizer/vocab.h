// The tokenizer's vocabulary as plain data, independent of any file format.
//
// Field meanings are those of the GGUF `tokenizer.ggml.*` keys (ggml docs/gguf.md, "Tokenizer"):
// `tokens` is `tokenizer.ggml.tokens` (token id = index), `token_types` is
// `tokenizer.ggml.token_type`, `merges` is `tokenizer.ggml.merges` (rank = index). For a byte-level
// BPE vocabulary ("gpt2"), normal tokens are stored in the GPT-2 byte-level alphabet (a space is
// "Ġ"), while control and user-defined tokens are stored as their literal text ("<|im_end|>").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::tokenizer {

/// llama.cpp's `llama_token_type` values as stored in `tokenizer.ggml.token_type`.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,       ///< special token (<|im_start|>, <|endoftext|>), text is literal
  user_defined = 4,  ///< added token (<think>, <tool_call>), text is literal
  unused = 5,        ///< padding entries ([PAD151669]); decode to nothing, never produced by encode
  byte = 6,          ///< <0xXX> byte tokens of SentencePiece vocabularies
};

/// "normal", "control", ... for messages.
std::string_view token_type_name(TokenType t);

/// A complete byte-level BPE vocabulary. Ids are int32_t; -1 means "none".
struct Vocab {
  std::string model = "gpt2";          ///< tokenizer.ggml.model; only "gpt2" (byte-level BPE) is supported
  std::string pre = "qwen2";           ///< tokenizer.ggml.pre; "qwen2", "llama-bpe" and their aliases
  std::vector<std::string> tokens;     ///< token texts, id = index; must be unique and non-empty
  std::vector<TokenType> token_types;  ///< same length as tokens, or empty (= all normal)
  std::vector<std::string> merges;     ///< "left right", rank = index; both parts and their
                                       ///< concatenation must be tokens
  int32_t bos_id = -1;                 ///< tokenizer.ggml.bos_token_id
  int32_t eos_id = -1;                 ///< tokenizer.ggml.eos_token_id
  int32_t pad_id = -1;                 ///< tokenizer.ggml.padding_token_id
  int32_t eot_id = -1;                 ///< tokenizer.ggml.eot_token_id
  int32_t eom_id = -1;                 ///< tokenizer.ggml.eom_token_id
  bool add_bos = false;                ///< tokenizer.ggml.add_bos_token
  std::string chat_template;           ///< tokenizer.chat_template (Jinja text; not executed)
  std::string architecture;            ///< general.architecture of the file it came from, if any
};

/// Which pre-tokenizer a `tokenizer.ggml.pre` name selects (llama.cpp's aliases included).
enum class PreType { qwen2, llama3 };
/// Throws std::invalid_argument for a name that is neither.
PreType pre_type(std::string_view pre);

/// Checks the parts of `v` that do not need the token index: supported model / pre names,
/// non-empty tokens, matching token_types length, special ids in range. Throws
/// std::invalid_argument naming the problem. (Duplicate tokens and bad merges are found by the
/// Tokenizer constructor, which builds the index anyway.)
void validate_vocab(const Vocab& v);

}  // namespace minfer::tokenizer
