// The fixture tokenizers, loaded once per test process (nullptr when the fixture is absent).
#pragma once

#include <memory>

#include "gguf/gguf.h"
#include "tok_test_util.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer::test {

/// The real Qwen2.5/Qwen3 tokenizer: tokenizer/qwen-vocab.gguf.
inline const Tokenizer* qwen_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    const auto p = fixture("tokenizer/qwen-vocab.gguf");
    if (p.empty()) return nullptr;
    return std::make_unique<Tokenizer>(Tokenizer::from_gguf(gguf::File(p)));
  }();
  return tok.get();
}

/// The 8k trained tokenizer, from the qwen3-xs model GGUF.
inline const Tokenizer* trained_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    const auto p = fixture("qwen3-xs/qwen3-xs-f16.gguf");
    if (p.empty()) return nullptr;
    return std::make_unique<Tokenizer>(Tokenizer::from_gguf(gguf::File(p)));
  }();
  return tok.get();
}

/// The same 8k tokenizer built from the Hugging Face tokenizer.json it was converted from.
inline const Tokenizer* trained_tokenizer_json() {
  static const std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    const auto p = fixture("tokenizer/python-bpe8k.tokenizer.json");
    if (p.empty()) return nullptr;
    return std::make_unique<Tokenizer>(vocab_from_hf_json(p));
  }();
  return tok.get();
}

}  // namespace minfer::tokenizer::test
