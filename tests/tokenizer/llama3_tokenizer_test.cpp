// The Llama 3 tokenizer (tokenizer.ggml.pre = llama-bpe): the real vocabulary against Hugging
// Face's ids for the 47 standard strings, the llama-s fixture's tokenizer against HF's prompt
// ids of refs.json (BOS from add_bos_token, never doubled), and llama.cpp's end-of-generation set.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "gguf/gguf.h"
#include "tok_test_util.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer::test {
namespace {

const Tokenizer* load(const char* rel) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[rel];
  if (!t) {
    const auto p = fixture(rel);
    if (p.empty()) return nullptr;
    t = std::make_unique<Tokenizer>(Tokenizer::from_gguf(gguf::File(p)));
  }
  return t.get();
}

TEST(Llama3Tokenizer, RealVocabularyMatchesHuggingFaceOnTheStandardStrings) {
  const Tokenizer* tok = load("tokenizer/llama3-vocab.gguf");
  const auto cases_path = fixture("tokenizer/llama3_tokenizer_cases.json");
  if (!tok || cases_path.empty()) GTEST_SKIP() << "llama3 fixtures not found under " << fixtures_dir();
  EXPECT_EQ(tok->vocab().pre, "llama-bpe");
  const auto cases = read_json(cases_path);
  ASSERT_EQ(cases.size(), 47u);
  for (const auto& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    SCOPED_TRACE(text);
    const auto ids = tok->encode(text, /*parse_special=*/false);
    EXPECT_EQ(ids, c.at("ids_llama3").get<std::vector<int32_t>>());
    EXPECT_EQ(tok->decode(ids), text);  // no normalizer: every string round-trips
  }
}

TEST(Llama3Tokenizer, FixtureTokenizerGivesHfPromptIds) {
  const Tokenizer* tok = load("llama-s/llama-s-f16.gguf");
  const auto refs = fixture("llama-s/refs.json");
  if (!tok || refs.empty()) GTEST_SKIP() << "llama-s fixture not found under " << fixtures_dir();
  ASSERT_TRUE(tok->add_bos_default());
  const auto cases = read_json(refs).at("cases");
  ASSERT_EQ(cases.size(), 5u);
  for (const auto& c : cases) {
    const std::string prompt = c.at("prompt").get<std::string>();
    SCOPED_TRACE(prompt.substr(0, 60));
    // Prompt 2 already starts with <|begin_of_text|>: it gets no second BOS.
    EXPECT_EQ(tok->with_bos(tok->encode(prompt, /*parse_special=*/true)), c.at("ids").get<std::vector<int32_t>>());
  }
}

TEST(Llama3Tokenizer, EndOfGenerationIsEveryTokenLlamaCppMarks) {
  const Tokenizer* tok = load("tokenizer/llama3-vocab.gguf");
  if (!tok) GTEST_SKIP() << "llama3 vocabulary not found";
  for (const char* t : {"<|eot_id|>", "<|end_of_text|>"}) {
    const auto id = tok->find_token(t);
    ASSERT_TRUE(id) << t;
    EXPECT_TRUE(tok->is_eog(*id)) << t;
  }
  EXPECT_EQ(tok->eot_id(), *tok->find_token("<|eot_id|>"));
  EXPECT_FALSE(tok->find_token("<|eom_id|>"));  // Llama 3.0's vocabulary has none (3.1 has, and it is EOG)
  EXPECT_FALSE(tok->is_eog(*tok->find_token("<|begin_of_text|>")));
  EXPECT_FALSE(tok->is_eog(*tok->find_token("<|start_header_id|>")));
  const Tokenizer* small = load("llama-s/llama-s-f16.gguf");
  if (!small) return;
  EXPECT_TRUE(small->is_eog(4));   // <|eot_id|>, also the file's EOS
  EXPECT_TRUE(small->is_eog(1));   // <|end_of_text|>
  EXPECT_FALSE(small->is_eog(0));  // <|begin_of_text|>
}

TEST(Llama3Tokenizer, DigitsGroupInThreesWithoutNormalization) {
  // Against the regex itself: Llama 3 splits digit runs into groups of up to three and applies
  // no NFC (a decomposed "é" stays a letter and a mark, split apart); Qwen2 splits every digit.
  const PreTokenizer llama(kLlama3SplitPattern), qwen(kQwen2SplitPattern);
  const std::vector<std::string_view> l = llama.split("1234567 e\xCC\x81");
  EXPECT_EQ(l, (std::vector<std::string_view>{"123", "456", "7", " e", "\xCC\x81"}));
  EXPECT_EQ(qwen.split("1234").size(), 4u);
}

}  // namespace
}  // namespace minfer::tokenizer::test
