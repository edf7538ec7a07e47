// ChatML formatting. Expected strings are written out from the Qwen3 Jinja template in the fixture
// GGUFs (tokenizer.chat_template) and the ChatML prompt of refs.json; the hand-written ones were
// cross-checked against a Jinja2 rendering of that template, and the last test compares against
// stored Jinja2 renderings of random conversations.
#include <gtest/gtest.h>

#include "fixture_tokenizers.h"
#include "tokenizer/chat.h"

using namespace minfer::tokenizer;
using Msgs = std::vector<ChatMessage>;

TEST(Chat, GenerationPromptQwen3) {
  const Msgs m = {{"system", "You are terse."}, {"user", "Hi"}};
  EXPECT_EQ(format_chatml(m, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  ChatOptions off;
  off.enable_thinking = false;
  EXPECT_EQ(format_chatml(m, true, off),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(format_chatml(m, false, off),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(Chat, MatchesRefsChatPromptAndItsIds) {
  const Msgs m = {{"user", "Write a function that reverses a list."}};
  const std::string prompt = format_chatml(m, true);
  EXPECT_EQ(prompt, "<|im_start|>user\nWrite a function that reverses a list.<|im_end|>\n<|im_start|>assistant\n");
  const auto p = test::fixture("qwen3-xs/refs.json");
  const Tokenizer* tok = test::trained_tokenizer();
  if (p.empty() || !tok) GTEST_SKIP() << "fixture missing";
  const auto c = test::read_json(p).at("cases").at(2);
  EXPECT_EQ(c.at("prompt").get<std::string>(), prompt);
  EXPECT_EQ(tok->encode(prompt, true), c.at("ids").get<std::vector<int32_t>>());
}

TEST(Chat, Qwen3HistoryThinkBlocks) {
  // Reasoning of turns before the last user query is dropped; the final assistant turn (after the
  // last query) keeps it in the normalized "<think>\n...\n</think>\n\n" form.
  const Msgs m = {{"user", "Q1"},
                  {"assistant", "<think>\nr1\n</think>\n\nA1"},
                  {"user", "Q2"},
                  {"assistant", "<think>r2</think>A2"}};
  EXPECT_EQ(format_chatml(m, false),
            "<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr2\n</think>\n\nA2<|im_end|>\n");
  // An assistant turn without reasoning after the last query: the last one gets an empty block.
  const Msgs m2 = {{"user", "Q"}, {"assistant", "A"}};
  EXPECT_EQ(format_chatml(m2, false),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n");
}

TEST(Chat, ToolMessagesAndRoles) {
  const Msgs m = {{"user", "weather?"}, {"assistant", "calling"}, {"tool", "sunny"}, {"tool", "20C"}};
  EXPECT_EQ(format_chatml(m, true),
            "<|im_start|>user\nweather?<|im_end|>\n"
            "<|im_start|>assistant\ncalling<|im_end|>\n"  // not last: no think block
            "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n20C\n"
            "</tool_response><|im_end|>\n<|im_start|>assistant\n");
  const Msgs bad = {{"narrator", "x"}};
  EXPECT_THROW(format_chatml(bad, true), std::invalid_argument);
  const Msgs late_system = {{"user", "a"}, {"system", "b"}};
  EXPECT_EQ(format_chatml(late_system, false),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n");
}

TEST(Chat, Qwen2PlainChatml) {
  ChatOptions o;
  o.qwen3 = false;
  o.enable_thinking = false;  // ignored for Qwen2
  const Msgs m = {{"system", "S"}, {"user", "U"}, {"assistant", "<think>x</think>A"}};
  EXPECT_EQ(format_chatml(m, true, o),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
            "<|im_start|>assistant\n<think>x</think>A<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Chat, StyleFromMetadata) {
  EXPECT_TRUE(chat_options_for("qwen2", "... {{- '<think>\\n\\n</think>\\n\\n' }} ...").qwen3);
  EXPECT_TRUE(chat_options_for("qwen3", "").qwen3);
  EXPECT_FALSE(chat_options_for("qwen2", "{% for message in messages %}<|im_start|>").qwen3);
  const Tokenizer* tok = test::qwen_tokenizer();
  if (!tok) GTEST_SKIP() << "fixture missing";
  // The vocab GGUF says qwen2 but ships the Qwen3 template.
  EXPECT_EQ(tok->vocab().architecture, "qwen2");
  EXPECT_TRUE(chat_options_for(tok->vocab().architecture, tok->vocab().chat_template).qwen3);
}

TEST(Chat, MatchesJinjaRenderingOfTheRealTemplate) {
  // data/qwen3_chat_cases.json: random conversations rendered by Jinja2 from the fixture GGUFs'
  // tokenizer.chat_template (data/gen_chat_cases.py), including think blocks in odd places, tool
  // turns and late system messages.
  const auto path = std::filesystem::path(MINFER_TOKENIZER_TEST_DATA) / "qwen3_chat_cases.json";
  const auto cases = test::read_json(path);
  ASSERT_GE(cases.size(), 100u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    Msgs m;
    for (const auto& j : c.at("messages")) {
      m.push_back({j.at("role").get<std::string>(), j.at("content").get<std::string>()});
    }
    ChatOptions o;
    o.enable_thinking = c.at("enable_thinking").get<bool>();
    EXPECT_EQ(format_chatml(m, c.at("add_generation_prompt").get<bool>(), o),
              c.at("expected").get<std::string>())
        << "case " << i;
  }
}
