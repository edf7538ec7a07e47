// The Qwen2 pre-tokenizer split. Expected pieces follow from the regex by hand (and agree with the
// Python `regex` module, a different engine, on the same pattern).
#include <gtest/gtest.h>

#include <random>

#include "tok_test_util.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

using namespace minfer::tokenizer;
using Pieces = std::vector<std::string>;

TEST(PreTokenizer, WhitespaceNeedsLookahead) {
  // \s+(?!\S) leaves the last space to join the next word.
  EXPECT_EQ(pretokenize_qwen2("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pretokenize_qwen2("\n\nHi"), (Pieces{"\n\n", "Hi"}));
  EXPECT_EQ(pretokenize_qwen2("x  "), (Pieces{"x", "  "}));
  EXPECT_EQ(pretokenize_qwen2("  \n  x"), (Pieces{"  \n", " ", " x"}));
  EXPECT_EQ(pretokenize_qwen2("\t\n"), (Pieces{"\t\n"}));
}

TEST(PreTokenizer, ContractionsDigitsPunctuation) {
  EXPECT_EQ(pretokenize_qwen2("Hello, y'all! I'VE 333 x"),
            (Pieces{"Hello", ",", " y", "'all", "!", " I", "'VE", " ", "3", "3", "3", " x"}));
  EXPECT_EQ(pretokenize_qwen2("foo();\n\n  bar"), (Pieces{"foo", "();\n\n", " ", " bar"}));
  EXPECT_EQ(pretokenize_qwen2(""), Pieces{});
}

TEST(PreTokenizer, UnicodeClasses) {
  // U+00A0 NO-BREAK SPACE is \s but not a plain space: it prefixes the letter run ([^\r\n\p{L}\p{N}]?).
  EXPECT_EQ(pretokenize_qwen2("a \xC2\xA0" "b"), (Pieces{"a", " ", "\xC2\xA0" "b"}));
  // Letters of any script form one run; CJK digits-free text stays together.
  EXPECT_EQ(pretokenize_qwen2("\xD0\xBD\xD0\xB5 \xE4\xBD\xA0\xE5\xA5\xBD"),
            (Pieces{"\xD0\xBD\xD0\xB5", " \xE4\xBD\xA0\xE5\xA5\xBD"}));
}

TEST(PreTokenizer, NfcBeforeSplit) {
  // "e" + COMBINING ACUTE is one letter after NFC; without NFC U+0301 (a mark, not \p{L}) would
  // end the letter run.
  EXPECT_EQ(pretokenize_qwen2("caf" "e\xCC\x81!"), (Pieces{"caf\xC3\xA9", "!"}));
}

TEST(PreTokenizer, PiecesCoverRandomText) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const char32_t alphabet[] = {U'a', U'Z', U' ', U'\n', U'\r', U'\t', U'\'', U's', U'3', U'.', U'(',
                               0xA0, 0x3000, 0x4F60, 0x1F600, 0x0301, 0x2028, U'!', 0x0661};
  PreTokenizer pre;
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    const int len = static_cast<int>(rng() % 60);
    for (int i = 0; i < len; ++i) utf8_append(s, alphabet[rng() % std::size(alphabet)]);
    std::string joined;
    for (std::string_view p : pre.split(s)) {
      ASSERT_FALSE(p.empty());
      ASSERT_TRUE(utf8_is_valid(p));
      joined.append(p);
    }
    ASSERT_EQ(joined, s);
  }
}

TEST(PreTokenizer, LongRunsDoNotOverflow) {
  PreTokenizer pre;
  const std::string spaces(1 << 20, ' ');
  const std::string text = spaces + "x";  // split() returns views into its argument
  const auto pieces = pre.split(text);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(), spaces.size() - 1);
  EXPECT_EQ(pieces[1], " x");
  const std::string letters(1 << 20, 'q');
  EXPECT_EQ(pre.split(letters).size(), 1u);
}

TEST(PreTokenizer, RejectsInvalidUtf8) {
  PreTokenizer pre;
  EXPECT_THROW(pre.split("ab\xC3"), std::invalid_argument);
  EXPECT_THROW(pretokenize_qwen2("\x80"), std::invalid_argument);
}
