// TokenSink, the one place generated tokens become text: a stop at every byte position inside
// 2-, 3- and 4-byte characters (n_predict, an end-of-generation token, a stop string) never
// leaves U+FFFD or a cut character, streamed or not; stop strings match across tokens and are not
// printed; text that could start one is held back only until it is ruled out.
#include <gtest/gtest.h>

#include "runtime/token_sink.h"
#include "tokenizer/unicode.h"

namespace minfer {
namespace {

using tokenizer::TokenType;

// One token per byte (the byte-level alphabet), plus <|im_end|> (id 256) as end of generation.
const tokenizer::Tokenizer& byte_tokenizer() {
  static const tokenizer::Tokenizer tok = [] {
    tokenizer::Vocab v;
    for (int b = 0; b < 256; ++b) v.tokens.push_back(tokenizer::byte_to_unicode()[b]);
    v.token_types.assign(256, TokenType::normal);
    v.tokens.push_back("<|im_end|>");
    v.token_types.push_back(TokenType::control);
    v.eos_id = 256;
    return tokenizer::Tokenizer(v);
  }();
  return tok;
}

struct Fed {
  GenerateResult r;
  std::string streamed;
};

// Feeds `bytes` one token each (then `tail` ids), as generate() does.
Fed feed(const std::string& bytes, const GenerateParams& gp, const std::vector<int32_t>& tail = {}) {
  SamplerParams sp;
  sp.temp = 0;
  Sampler sampler(sp);
  Fed run;
  std::function<void(std::string_view)> on_text = [&](std::string_view s) { run.streamed += s; };
  TokenSink sink(byte_tokenizer(), sampler, gp, run.r, on_text);
  std::vector<int32_t> ids;
  for (unsigned char c : bytes) ids.push_back(c);
  ids.insert(ids.end(), tail.begin(), tail.end());
  for (int32_t id : ids)
    if (!sink.push(id)) break;
  sink.finish();
  return run;
}

// The complete characters among the first n bytes of s.
std::string whole_chars(const std::string& s, size_t n) {
  size_t end = 0;
  while (end < n) {
    const auto sc = tokenizer::utf8_scan(s, end);
    if (end + sc.len > n) break;
    end += sc.len;
  }
  return s.substr(0, end);
}

const std::string kText = "a\u00e9b\u20acc\U0001F680d\u00df\u4e2d\U0001F600z";  // 2-, 3- and 4-byte characters

void expect_clean(const Fed& run, const std::string& want, const std::string& what) {
  EXPECT_EQ(run.r.text, want) << what;
  EXPECT_EQ(run.streamed, want) << what;
  EXPECT_TRUE(tokenizer::utf8_is_valid(run.r.text)) << what;
  EXPECT_EQ(run.r.text.find("\xEF\xBF\xBD"), std::string::npos) << what;
}

TEST(TokenSink, NoReplacementCharacterWhereverNPredictStops) {
  for (size_t n = 1; n <= kText.size(); ++n) {
    GenerateParams gp;
    gp.n_predict = static_cast<int32_t>(n);
    const Fed run = feed(kText, gp);
    EXPECT_EQ(run.r.stop_reason, "length");
    expect_clean(run, whole_chars(kText, n), "n_predict " + std::to_string(n));
  }
}

TEST(TokenSink, NoReplacementCharacterWhereverAnEndOfGenerationStops) {
  for (size_t n = 1; n <= kText.size(); ++n) {
    GenerateParams gp;
    gp.n_predict = -1;
    const Fed run = feed(kText.substr(0, n), gp, {256, 'x'});
    EXPECT_EQ(run.r.stop_reason, "eog");
    expect_clean(run, whole_chars(kText, n), "eog after byte " + std::to_string(n));
  }
}

TEST(TokenSink, StopStringsMatchAcrossTokensAndAreNotPrinted) {
  // Every character boundary as the start of a stop string of every length, with bytes of a cut
  // character after it.
  const std::vector<std::string> chars = [] {
    std::vector<std::string> cs;
    for (size_t i = 0; i < kText.size();) {
      const size_t n = tokenizer::utf8_scan(kText, i).len;
      cs.push_back(kText.substr(i, n));
      i += n;
    }
    return cs;
  }();
  size_t at = 0;
  for (size_t k = 0; k < chars.size(); ++k) {
    std::string stop;
    for (size_t len = 1; k + len <= chars.size(); ++len) {
      stop += chars[k + len - 1];
      GenerateParams gp;
      gp.n_predict = -1;
      gp.stop = {"never-matches-\u00e9", stop};
      const Fed run = feed(kText + "\xF0\x9F", gp);
      EXPECT_EQ(run.r.stop_reason, "stop") << stop;
      expect_clean(run, kText.substr(0, at), "stop '" + stop + "'");
    }
    at += chars[k].size();
  }
}

TEST(TokenSink, HeldBackTextIsReleasedWhenRuledOut) {
  GenerateParams gp;
  gp.n_predict = -1;
  gp.stop = {"\u20acX"};  // "€" alone is only the start of the stop string
  const Fed run = feed(kText, gp);
  EXPECT_EQ(run.r.stop_reason, "");  // ran out of tokens: no stop condition met
  expect_clean(run, kText, "no stop");
}

// Only a tail that is a proper prefix of a stop string waits: other text streams with its token
// (a long stop string of another letter held back the whole output before).
TEST(TokenSink, OnlyAPossibleStartOfAStopStringIsHeldBack) {
  SamplerParams sp;
  sp.temp = 0;
  Sampler sampler(sp);
  GenerateParams gp;
  gp.n_predict = -1;
  gp.stop = {std::string(400, 'Z'), "os!"};
  GenerateResult r;
  std::string streamed;
  std::function<void(std::string_view)> on_text = [&](std::string_view s) { streamed += s; };
  TokenSink sink(byte_tokenizer(), sampler, gp, r, on_text);
  const std::string text = "import os\nZZ";
  const std::vector<std::string> want = {"i", "im", "imp", "imp", "impor", "import", "import ", "import ",
                                         "import ", "import os\n", "import os\n", "import os\n"};
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(sink.push(static_cast<unsigned char>(text[i])));
    EXPECT_EQ(streamed, want[i]) << "after byte " << i;
  }
  sink.finish();
  EXPECT_EQ(streamed, text);
}

// Of two stop strings completed by one token, the one that starts first ends the text.
TEST(TokenSink, TheEarliestStopStringEndsTheText) {
  GenerateParams gp;
  gp.n_predict = -1;
  gp.stop = {"c", "bc"};
  const Fed run = feed("abcd", gp);
  EXPECT_EQ(run.r.stop_reason, "stop");
  expect_clean(run, "a", "earliest stop");
}

TEST(TokenSink, CancelStopsAfterTheCurrentToken) {
  std::atomic<bool> cancel{true};
  GenerateParams gp;
  gp.cancel = &cancel;
  const Fed run = feed("ab", gp);
  EXPECT_EQ(run.r.stop_reason, "cancelled");
  EXPECT_EQ(run.r.ids.size(), 1u);
  expect_clean(run, "a", "cancel");
}

}  // namespace
}  // namespace minfer
