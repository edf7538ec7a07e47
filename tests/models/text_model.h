// A fixture model on the CPU with its tokenizer and the held-out text (text/python-val.txt)
// tokenized, for tests that need realistic prompts of given lengths (the scheduler tests).
#pragma once

#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {

struct TextModel {
  std::shared_ptr<const gguf::File> file;
  CpuBackend cpu{2};
  std::unique_ptr<Model> model;
  std::optional<tokenizer::Tokenizer> tok;
  std::vector<int32_t> text;  ///< the first `max_chars` characters of python-val.txt, tokenized

  /// False when the fixture or the text is absent.
  bool load(const std::string& path, size_t max_chars) {
    file = open_fixture(path);
    if (!file || fixture("text/python-val.txt").empty()) return false;
    model = models::load(file, cpu);
    tok.emplace(tokenizer::Tokenizer::from_gguf(*file));
    std::ifstream in(fixture("text/python-val.txt"));
    std::stringstream ss;
    ss << in.rdbuf();
    text = tok->encode(ss.str().substr(0, max_chars), false);
    return true;
  }
  /// n consecutive tokens of the text from a random position.
  std::vector<int32_t> slice(int64_t n) const {
    const auto at = static_cast<size_t>(rand_int(0, static_cast<int64_t>(text.size()) - n - 1));
    return {text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(at) + n};
  }
  /// A slice of random length in [lo, hi].
  std::vector<int32_t> random_prompt(int64_t lo, int64_t hi) const { return slice(rand_int(lo, hi)); }
};

}  // namespace minfer::test

#define LOAD_TEXT_MODEL_OR_SKIP(L, path, max_chars)     \
  ::minfer::test::TextModel L;                          \
  if (!L.load(path, max_chars)) GTEST_SKIP() << "fixtures not found under " << ::minfer::test::fixtures_dir()
