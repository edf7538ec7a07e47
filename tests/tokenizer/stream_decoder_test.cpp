// Streaming detokenization: only whole characters come out, in order, and nothing is lost.
#include <gtest/gtest.h>

#include <random>

#include "fixture_tokenizers.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/unicode.h"

using namespace minfer::tokenizer;

namespace {

Tokenizer byte_tokenizer() {
  Vocab v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_level_encode(std::string(1, char(b))));
  v.tokens.push_back("<|im_end|>");
  v.token_types.assign(256, TokenType::normal);
  v.token_types.push_back(TokenType::control);
  return Tokenizer(v);
}

std::string random_utf8(std::mt19937_64& rng, size_t n_chars) {
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) {
    char32_t cp;
    switch (rng() % 4) {
      case 0: cp = 0x20 + rng() % 0x5F; break;                 // 1 byte
      case 1: cp = 0x80 + rng() % (0x800 - 0x80); break;       // 2 bytes
      case 2: cp = 0x800 + rng() % (0xD800 - 0x800); break;    // 3 bytes, below surrogates
      default: cp = 0x10000 + rng() % (0x110000 - 0x10000);    // 4 bytes
    }
    utf8_append(s, cp);
  }
  return s;
}

}  // namespace

TEST(StreamDecoder, EmojiSplitAcrossTokensComesOutWhole) {
  const Tokenizer* tok = test::qwen_tokenizer();
  if (!tok) GTEST_SKIP() << "fixture missing";
  const std::string llama = "\xF0\x9F\xA6\x99";  // U+1F999 LLAMA
  const std::string text = " this is " + llama + ".cpp";
  const auto ids = tok->encode(text, false);
  // Precondition: the emoji really is split (some piece is not valid UTF-8 on its own).
  bool split = false;
  for (int32_t id : ids) split |= !utf8_is_valid(tok->token_to_piece(id));
  ASSERT_TRUE(split);

  StreamDecoder dec(*tok);
  std::string all;
  bool held_back = false;
  for (int32_t id : ids) {
    const std::string out = dec.push(id);
    EXPECT_TRUE(utf8_is_valid(out)) << "partial character leaked";
    held_back |= dec.pending() > 0;
    // The llama arrives in one piece or not at all.
    if (out.find('\xF0') != std::string::npos) {
      EXPECT_NE(out.find(llama), std::string::npos);
    }
    all += out;
  }
  EXPECT_TRUE(held_back);
  all += dec.flush();
  EXPECT_EQ(all, text);
}

TEST(StreamDecoder, RandomCutPointsReassembleExactly) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Tokenizer tok = byte_tokenizer();
  for (int iter = 0; iter < 200; ++iter) {
    const std::string text = random_utf8(rng, 1 + rng() % 80);
    StreamDecoder dec(tok);
    std::string all;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = std::min<size_t>(text.size() - pos, rng() % 6);
      const std::string out = dec.push_bytes(std::string_view(text).substr(pos, len));
      ASSERT_TRUE(utf8_is_valid(out));
      ASSERT_LE(dec.pending(), 3u);
      all += out;
      pos += len;
    }
    ASSERT_EQ(dec.pending(), 0u);  // valid text: nothing held at the end
    all += dec.flush();
    ASSERT_EQ(all, text);
  }
}

TEST(StreamDecoder, RealTokensOfRandomText) {
  const Tokenizer* tok = test::qwen_tokenizer();
  if (!tok) GTEST_SKIP() << "fixture missing";
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 30; ++iter) {
    const std::string text = nfc_normalize(random_utf8(rng, 1 + rng() % 40));
    StreamDecoder dec(*tok);
    std::string all;
    for (int32_t id : tok->encode(text, false)) {
      const std::string out = dec.push(id);
      ASSERT_TRUE(utf8_is_valid(out));
      all += out;
    }
    all += dec.flush();
    ASSERT_EQ(all, text);
  }
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer tok = byte_tokenizer();
  // The Unicode §3.9 example streamed one byte at a time gives the same result as all at once.
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  StreamDecoder dec(tok);
  std::string all;
  for (char c : in) all += dec.push(static_cast<uint8_t>(c));
  all += dec.flush();
  EXPECT_EQ(all, utf8_replace_invalid(in));
  // A truncated character at the very end is flushed as one U+FFFD.
  StreamDecoder dec2(tok);
  EXPECT_EQ(dec2.push(0xF0), "");
  EXPECT_EQ(dec2.push(0x9F), "");
  EXPECT_EQ(dec2.pending(), 2u);
  EXPECT_EQ(dec2.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec2.pending(), 0u);
}

TEST(StreamDecoder, SpecialsAndBadIds) {
  const Tokenizer tok = byte_tokenizer();
  StreamDecoder keep(tok), skip(tok, /*skip_special=*/true);
  EXPECT_EQ(keep.push(256), "<|im_end|>");
  EXPECT_EQ(skip.push(256), "");
  EXPECT_EQ(keep.push(0xC3), "");
  EXPECT_THROW(keep.push(257), std::out_of_range);
  EXPECT_EQ(keep.pending(), 1u);  // state unchanged by the failed push
  EXPECT_EQ(keep.push(0xA9), "\xC3\xA9");
}
