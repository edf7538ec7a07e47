// UTF-8 repair, NFC and the GPT-2 byte-level alphabet.
#include <gtest/gtest.h>

#include <set>

#include "tokenizer/unicode.h"

using namespace minfer::tokenizer;

namespace {
const std::string kFFFD = "\xEF\xBF\xBD";
}

TEST(ByteLevel, AlphabetMatchesGpt2Definition) {
  const auto& t = byte_to_unicode();
  std::set<std::string> distinct(t.begin(), t.end());
  EXPECT_EQ(distinct.size(), 256u);
  // Spec points from GPT-2 encoder.py: printable ASCII is itself, space is U+0120 'Ġ', newline is
  // U+010A 'Ċ', byte 0 is U+0100, 0xAD (soft hyphen, not printable) is U+0143, the last one.
  EXPECT_EQ(t['a'], "a");
  EXPECT_EQ(t['~'], "~");
  EXPECT_EQ(t[' '], "\xC4\xA0");
  EXPECT_EQ(t['\n'], "\xC4\x8A");
  EXPECT_EQ(t[0], "\xC4\x80");
  EXPECT_EQ(t[0xAD], "\xC5\x83");
  EXPECT_EQ(t[0xE9], "\xC3\xA9");  // printable Latin-1 maps to itself
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_EQ(byte_level_decode(byte_level_encode(one)), one) << b;
  }
}

TEST(ByteLevel, DecodeFallsBackToRawTextOutsideAlphabet) {
  // U+4E2D is not in the alphabet: HF's ByteLevel decoder keeps such a token's raw UTF-8.
  EXPECT_EQ(byte_level_decode("\xE4\xB8\xAD"), "\xE4\xB8\xAD");
  EXPECT_EQ(byte_level_decode("\xC4\xA0hi"), " hi");
}

TEST(Utf8, UnicodeStandardReplacementExample) {
  // Unicode 15 §3.9, Table 3-8 (U+FFFD for maximal subparts): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string want = "a" + kFFFD + kFFFD + kFFFD + "b" + kFFFD + "c" + kFFFD + kFFFD + "d";
  EXPECT_EQ(utf8_replace_invalid(in), want);
  EXPECT_FALSE(utf8_is_valid(in));
  EXPECT_EQ(utf8_first_invalid(in), 1u);
}

TEST(Utf8, IllFormedClasses) {
  EXPECT_EQ(utf8_replace_invalid("\xC0\xAF"), kFFFD + kFFFD);             // overlong: C0 never valid
  EXPECT_EQ(utf8_replace_invalid("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // surrogate D800
  EXPECT_EQ(utf8_replace_invalid("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);  // > U+10FFFF
  EXPECT_EQ(utf8_replace_invalid("x\xF0\x9F\x98"), "x" + kFFFD);          // truncated at end: one
  const std::string ok = "h\xC3\xA9llo \xE4\xBD\xA0 \xF0\x9F\x98\x81";
  EXPECT_TRUE(utf8_is_valid(ok));
  EXPECT_EQ(utf8_replace_invalid(ok), ok);
  EXPECT_EQ(utf8_scan(ok, 1).kind, Utf8Scan::valid);
  EXPECT_EQ(utf8_scan(ok, 1).len, 2u);
  EXPECT_EQ(utf8_scan("\xF0\x9F", 0).kind, Utf8Scan::incomplete);
}

TEST(Nfc, ComposesAndRejectsInvalid) {
  EXPECT_EQ(nfc_normalize("e\xCC\x81"), "\xC3\xA9");       // e + U+0301 -> U+00E9
  EXPECT_EQ(nfc_normalize("A\xCC\x8A"), "\xC3\x85");       // A + ring -> U+00C5
  EXPECT_EQ(nfc_normalize("\xE2\x84\xAB"), "\xC3\x85");    // U+212B ANGSTROM SIGN -> U+00C5
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc_normalize("\xEF\xAC\x81"), "\xEF\xAC\x81");  // ligature fi: NFC keeps it (NFKC would not)
  try {
    nfc_normalize("ok\xFFno");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("offset 2"), std::string::npos) << e.what();
  }
}
