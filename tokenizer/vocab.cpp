#include "tokenizer/vocab.h"

#include <stdexcept>
#include <string>

namespace minfer::tokenizer {

std::string_view token_type_name(TokenType t) {
  switch (t) {
    case TokenType::undefined: return "undefined";
    case TokenType::normal: return "normal";
    case TokenType::unknown: return "unknown";
    case TokenType::control: return "control";
    case TokenType::user_defined: return "user_defined";
    case TokenType::unused: return "unused";
    case TokenType::byte: return "byte";
  }
  return "invalid";
}

PreType pre_type(std::string_view pre) {
  // llama.cpp (llama-vocab.cpp) maps these names onto the same two regexes.
  if (pre == "qwen2" || pre == "qwen2.5" || pre == "qwen-2.5" || pre == "deepseek-r1-qwen") return PreType::qwen2;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") return PreType::llama3;
  throw std::invalid_argument("tokenizer: unsupported pre-tokenizer '" + std::string(pre) +
                              "' (implemented: qwen2, llama-bpe)");
}

void validate_vocab(const Vocab& v) {
  if (v.model != "gpt2") {
    throw std::invalid_argument("tokenizer: unsupported tokenizer model '" + v.model +
                                "' (only byte-level BPE 'gpt2' is implemented)");
  }
  pre_type(v.pre);
  if (v.tokens.empty()) throw std::invalid_argument("tokenizer: vocabulary has no tokens");
  if (v.tokens.size() > static_cast<size_t>(INT32_MAX)) {
    throw std::invalid_argument("tokenizer: vocabulary too large");
  }
  if (!v.token_types.empty() && v.token_types.size() != v.tokens.size()) {
    throw std::invalid_argument("tokenizer: token_types has " + std::to_string(v.token_types.size()) +
                                " entries but tokens has " + std::to_string(v.tokens.size()));
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i].empty()) {
      throw std::invalid_argument("tokenizer: token " + std::to_string(i) + " is empty");
    }
  }
  for (size_t i = 0; i < v.token_types.size(); ++i) {
    const auto t = static_cast<int32_t>(v.token_types[i]);
    if (t < 0 || t > 6) {
      throw std::invalid_argument("tokenizer: token " + std::to_string(i) + " has invalid type " +
                                  std::to_string(t));
    }
  }
  const auto n = static_cast<int64_t>(v.tokens.size());
  auto check_id = [n](int32_t id, const char* what) {
    if (id < -1 || id >= n) {
      throw std::invalid_argument(std::string("tokenizer: ") + what + " " + std::to_string(id) +
                                  " is out of range for a vocabulary of " + std::to_string(n) +
                                  " tokens");
    }
  };
  check_id(v.bos_id, "bos_token_id");
  check_id(v.eos_id, "eos_token_id");
  check_id(v.pad_id, "padding_token_id");
  check_id(v.eot_id, "eot_token_id");
  check_id(v.eom_id, "eom_token_id");
  if (v.add_bos && v.bos_id < 0)
    throw std::invalid_argument("tokenizer: add_bos_token is true but the vocabulary has no bos_token_id");
}

}  // namespace minfer::tokenizer
