// The Qwen2 pre-tokenizer: splits (already NFC-normalized) text into the words that BPE encodes
// one by one.
//
// The regex is the `Split` pattern of Qwen2's Hugging Face tokenizer.json (behavior "Isolated":
// every match is a word, text between matches would be a word too, although this pattern matches
// every character), identical to llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2 expression:
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
//
// It is compiled with PCRE2 in UTF + UCP mode (Unicode properties for \s, \p{L}, \p{N} and
// case-insensitive matching), JIT-compiled when the library supports it. PCRE2 and Hugging Face's
// Oniguruma agree on these classes except for exotic code points (PCRE2 10.42 counts U+180E as \s).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::tokenizer {

/// The Qwen2 split pattern, as in tokenizer.json.
extern const std::string_view kQwen2SplitPattern;
/// The Llama 3 split pattern (Llama-3 tokenizer.json; llama.cpp LLAMA_VOCAB_PRE_TYPE_LLAMA3):
/// Qwen2's with digits grouped in runs of up to three (\p{N}{1,3}).
extern const std::string_view kLlama3SplitPattern;

class PreTokenizer {
 public:
  /// Compiles `pattern` (default: Qwen2). Throws std::runtime_error with PCRE2's message when the
  /// pattern does not compile.
  explicit PreTokenizer(std::string_view pattern = kQwen2SplitPattern);

  /// Splits `text` into consecutive pieces that cover it exactly (their concatenation is `text`).
  /// `text` must be well-formed UTF-8; otherwise std::invalid_argument (with the byte offset).
  /// The views point into `text`. Thread-safe (the compiled pattern is shared read-only).
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

/// NFC-normalizes `text` and splits it with the Qwen2 pattern; the test-friendly entry point
/// ("a   b" -> "a", "  ", " b").
std::vector<std::string> pretokenize_qwen2(std::string_view text);

}  // namespace minfer::tokenizer
