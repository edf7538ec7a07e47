// Tokenizing rendered chats: special tokens only where the template wrote them, whatever the
// content holds; ordinary conversations get Hugging Face's ids (refs.json); one BOS at most.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "chat/chat_template.h"
#include "chat/tokenize_chat.h"
#include "gguf/gguf.h"
#include "oracle.h"
#include "tokenizer/tok_test_util.h"

namespace minfer::test {
namespace {

using tokenizer::TokenType;
using tokenizer::Tokenizer;

struct Fixture {
  const char* name;
  const char* gguf;        ///< vocabulary (and its chat template unless `tpl` is set)
  const char* tpl;         ///< a template file from data/templates, or "" for the GGUF's own
};

const Fixture kFixtures[] = {
    {"Qwen3Trained", "qwen3-xs/qwen3-xs-f16.gguf", ""},
    {"Qwen2Trained", "qwen2-s/qwen2-s-f16.gguf", ""},
    {"LlamaTrained", "llama-s/llama-s-f16.gguf", ""},
    {"QwenRealQwen25", "tokenizer/qwen-vocab.gguf", "qwen2.5-instruct.jinja"},
    {"QwenRealQwen3", "tokenizer/qwen-vocab.gguf", "qwen3.jinja"},
    {"Llama3Real", "tokenizer/llama3-vocab.gguf", ""},
    {"Llama3RealLlama31", "tokenizer/llama3-vocab.gguf", "llama3.1.jinja"},
};

const Tokenizer* load(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[rel];
  if (!t) {
    const auto p = tokenizer::test::fixture(rel);
    if (p.empty()) return nullptr;
    t = std::make_unique<Tokenizer>(Tokenizer::from_gguf(gguf::File(p)));
  }
  return t.get();
}

chat::ChatTemplate template_for(const Fixture& f, const Tokenizer& tok) {
  if (!*f.tpl) return chat::select_chat_template(tok, "");
  return chat::select_chat_template(tok, (std::filesystem::path(MINFER_CHAT_TEST_DATA) / "templates" / f.tpl).string());
}

bool is_special(const Tokenizer& tok, int32_t id) {
  const TokenType t = tok.token_type(id);
  return t == TokenType::control || t == TokenType::user_defined;
}

// The special ids of `ids` in order.
std::vector<int32_t> specials_of(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<int32_t> out;
  for (int32_t id : ids)
    if (is_special(tok, id)) out.push_back(id);
  return out;
}

class ChatInjection : public ::testing::TestWithParam<Fixture> {};

// Every special token of the vocabulary in the user and system content, alone and glued to
// text: the ids must hold special tokens only at the template's positions — the same special
// sequence as the same conversation with harmless content — and decode back to the rendering.
TEST_P(ChatInjection, SpecialTokensOnlyAtTemplatePositions) {
  const Fixture& f = GetParam();
  const Tokenizer* tok = load(f.gguf);
  if (!tok) GTEST_SKIP() << "fixture " << f.gguf << " not found under " << tokenizer::test::fixtures_dir();
  const chat::ChatTemplate t = template_for(f, *tok);
  std::string all;
  for (int32_t id = 0; id < tok->n_vocab(); ++id)
    if (is_special(*tok, id)) all += tok->token_text(id) + (id % 3 == 0 ? "\n" : id % 3 == 1 ? " x" : "");
  ASSERT_FALSE(all.empty());
  auto conversation = [&](const std::string& sys, const std::string& user) {
    chat::ChatInputs in;
    in.messages = chat::messages_value({{"system", sys}, {"user", user}, {"assistant", user}, {"user", sys}});
    in.add_generation_prompt = true;
    return t.render(in);
  };
  const jinja::Text evil = conversation("  " + all, all + "\n");
  const jinja::Text plain = conversation("  system text", "user text\n");
  const std::vector<int32_t> ids = chat::tokenize_chat(*tok, evil);
  const std::vector<int32_t> ref = chat::tokenize_chat(*tok, plain);
  EXPECT_EQ(specials_of(*tok, ids), specials_of(*tok, ref));
  ASSERT_GT(specials_of(*tok, ref).size(), 0u) << "the template writes no special token?";
  // Each special id covers template bytes only.
  const size_t skip = ids.size() > 0 && ids[0] == tok->bos_id() && !evil.s.starts_with(tok->token_text(ids[0])) ? 1 : 0;
  size_t off = 0;
  for (size_t k = skip; k < ids.size(); ++k) {
    const std::string& piece = tok->token_to_piece(ids[k]);
    if (is_special(*tok, ids[k])) {
      for (size_t b = off; b < off + piece.size(); ++b) ASSERT_FALSE(evil.tainted_at(b)) << "token " << k << " '" << piece << "'";
    }
    off += piece.size();
  }
  EXPECT_EQ(tok->decode(std::span<const int32_t>(ids).subspan(skip)), evil.s);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ChatInjection, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return std::string(info.param.name); });

// The ChatML / Llama-3 prompt of refs.json (computed by HF from the formatted text) is what the
// model's own template gives for that conversation.
TEST(TokenizeChat, RefsChatPromptIsTheTemplatesOutputWithHfIds) {
  for (const char* dir : {"qwen3-xs", "qwen2-s", "qwen3-s", "llama-s", "qwen3moe-s", "qwen2-yarn-s"}) {
    SCOPED_TRACE(dir);
    const auto refs = tokenizer::test::fixture(std::string(dir) + "/refs.json");
    std::string gguf;
    for (const char* f : {"-f16.gguf", "-Q4_K_M.gguf"})
      if (gguf.empty() && !tokenizer::test::fixture(std::string(dir) + "/" + dir + f).empty()) gguf = std::string(dir) + "/" + dir + f;
    if (refs.empty() || gguf.empty()) {
      std::printf("[ skipped ] %s: fixture not found\n", dir);
      continue;
    }
    const Tokenizer* tok = load(gguf);
    const auto c = tokenizer::test::read_json(refs).at("cases").at(2);
    chat::ChatInputs in;
    in.messages = chat::messages_value({{"user", "Write a function that reverses a list."}});
    in.add_generation_prompt = true;
    const jinja::Text r = chat::select_chat_template(*tok, "").render(in);
    EXPECT_EQ(r.s, c.at("prompt").get<std::string>());
    EXPECT_EQ(chat::tokenize_chat(*tok, r), c.at("ids").get<std::vector<int32_t>>());
  }
}

TEST(TokenizeChat, NeverTwoBos) {
  const Tokenizer* tok = load("llama-s/llama-s-f16.gguf");
  if (!tok) GTEST_SKIP() << "llama-s fixture not found";
  ASSERT_TRUE(tok->add_bos_default());
  const int32_t bos = tok->bos_id();
  // The template writes bos_token: one BOS.
  chat::ChatInputs in;
  in.messages = chat::messages_value({{"user", "hi"}});
  const auto ids = chat::tokenize_chat(*tok, chat::select_chat_template(*tok, "").render(in));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], bos);
  EXPECT_NE(ids[1], bos);
  // ChatML does not: the file's add_bos_token adds it.
  const auto ml = chat::tokenize_chat(*tok, chat::select_chat_template(*tok, "chatml").render(in));
  EXPECT_EQ(ml[0], bos);
  EXPECT_NE(ml[1], bos);
  // Content that starts with the BOS text is data: BOS is still added, and the text stays text.
  jinja::Text data = jinja::Text::of(tok->token_text(bos) + "x", true);
  const auto d = chat::tokenize_chat(*tok, data);
  EXPECT_EQ(d[0], bos);
  EXPECT_NE(d[1], bos);
}

TEST(TokenizeChat, SelectionAndItsErrors) {
  const Tokenizer* tok = load("qwen3-xs/qwen3-xs-f16.gguf");
  if (!tok) GTEST_SKIP() << "qwen3-xs fixture not found";
  EXPECT_EQ(chat::select_chat_template(*tok, "").source(), tok->vocab().chat_template);
  EXPECT_EQ(chat::select_chat_template(*tok, "chatml").source(), chat::ChatTemplate::chatml_source());
  try {
    chat::select_chat_template(*tok, "/nonexistent/template.jinja");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "cannot read chat template file '/nonexistent/template.jinja' (--chat-template chatml|FILE)");
  }
  const auto bad = std::filesystem::temp_directory_path() / "minfer_bad_template.jinja";
  std::ofstream(bad) << "hello\n{% include 'other.jinja' %}\n";
  try {
    chat::select_chat_template(*tok, bad.string());
    FAIL() << "no error";
  } catch (const jinja::TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2: unsupported statement 'include'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minfer::test
