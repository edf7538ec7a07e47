#include "tokenizer/vocab_gguf.h"

#include <stdexcept>
#include <string>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {
namespace {

int32_t optional_id(const gguf::File& f, std::string_view key) {
  const auto v = f.get_optional<uint32_t>(key);
  if (!v) return -1;
  if (*v > static_cast<uint32_t>(INT32_MAX)) {
    throw std::invalid_argument("tokenizer: " + std::string(key) + " = " + std::to_string(*v) +
                                " is out of range (file " + f.name() + ")");
  }
  return static_cast<int32_t>(*v);
}

std::vector<std::string> string_array(const gguf::File& f, std::string_view key) {
  const std::vector<std::string_view> views = f.get_string_array(key);
  return {views.begin(), views.end()};
}

}  // namespace

Vocab vocab_from_gguf(const gguf::File& f) {
  Vocab v;
  v.model = std::string(f.get_string("tokenizer.ggml.model"));
  if (v.model == "gpt2" && !f.has("tokenizer.ggml.pre")) {
    throw std::invalid_argument("tokenizer: " + f.name() +
                                " has no tokenizer.ggml.pre (the pre-tokenizer name, e.g. 'qwen2')");
  }
  v.pre = std::string(f.get_string_or("tokenizer.ggml.pre", ""));
  v.tokens = string_array(f, "tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.token_type")) {
    const std::vector<int32_t> types = f.get_array<int32_t>("tokenizer.ggml.token_type");
    v.token_types.reserve(types.size());
    for (int32_t t : types) v.token_types.push_back(static_cast<TokenType>(t));
  }
  if (v.model == "gpt2") v.merges = string_array(f, "tokenizer.ggml.merges");
  v.bos_id = optional_id(f, "tokenizer.ggml.bos_token_id");
  v.eos_id = optional_id(f, "tokenizer.ggml.eos_token_id");
  v.pad_id = optional_id(f, "tokenizer.ggml.padding_token_id");
  v.eot_id = optional_id(f, "tokenizer.ggml.eot_token_id");
  v.eom_id = optional_id(f, "tokenizer.ggml.eom_token_id");
  // Absent key: llama.cpp's default for the pre-tokenizer (true for the Llama 3 family).
  const bool llama3 = v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3";
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", llama3);
  v.chat_template = std::string(f.get_string_or("tokenizer.chat_template", ""));
  v.architecture = std::string(f.get_string_or("general.architecture", ""));
  return v;
}

Tokenizer Tokenizer::from_gguf(const gguf::File& file) { return Tokenizer(vocab_from_gguf(file)); }

}  // namespace minfer::tokenizer
