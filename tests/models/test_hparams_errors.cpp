// Hyper-parameters a broken GGUF can carry are refused when the file is read, naming the key,
// instead of surfacing later as a message about -c, a wrapped negative head dim, or a token id
// past the embedding (each one found by mutating the fixtures' qwen3moe and llama files).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model_fixtures.h"

namespace minfer::test {
namespace {

void expect_refused(const std::function<void(gguf::Writer&)>& keys, const std::string& needle) {
  try {
    (void)minimal_qwen2_hparams(keys);
    ADD_FAILURE() << "no exception, wanted '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<std::string> n_tokens(int n) {
  std::vector<std::string> t;
  for (int i = 0; i < n; ++i) t.push_back(fmt::format("t{}", i));
  return t;
}

TEST(HParamsErrors, ContextLengthAndHeadDimsMustFitInt32AndBePositive) {
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen2.block_count", 0); }, "qwen2.block_count is 0");
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen2.attention.head_count_kv", 0x80000000u); },
                 "qwen2.attention.head_count_kv is 2147483648");
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen2.context_length", 0); }, "qwen2.context_length is 0");
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen2.context_length", 0xffffffffu); }, "qwen2.context_length is 4294967295");
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen2.attention.key_length", 0x80000000u); },
                 "qwen2.attention.key_length is 2147483648");
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen2.attention.value_length", 0); }, "qwen2.attention.value_length is 0");
  const HParams h = minimal_qwen2_hparams([](gguf::Writer& w) { w.set_u32("qwen2.context_length", 0x7fffffffu); });
  EXPECT_EQ(h.n_ctx_train, 0x7fffffff);
  EXPECT_EQ(h.head_dim, 32);  // n_embd / n_head without the key
}

TEST(HParamsErrors, ExpertsUsedWithoutExpertCountIsNamed) {
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen2.expert_used_count", 2); },
                 "qwen2.expert_used_count is 2 but qwen2.expert_count is missing or 0");
}

// token_embd has 4 rows: a vocabulary of 5 tokens has one no embedding holds; 4 or fewer (rows
// as padding) are fine.
TEST(HParamsErrors, VocabularyLargerThanTheEmbeddingIsRefused) {
  expect_refused([](gguf::Writer& w) { w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(n_tokens(5))); },
                 "the vocabulary has 5 tokens but token_embd.weight has 4 rows");
  for (int n : {3, 4}) {
    const HParams h = minimal_qwen2_hparams(
        [&](gguf::Writer& w) { w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(n_tokens(n))); });
    EXPECT_EQ(h.n_vocab, 4);
  }
}

}  // namespace
}  // namespace minfer::test
