// UTF-8 and Unicode helpers of the tokenizer: UTF-8 validation and repair, NFC normalization and
// the GPT-2 byte-level alphabet.
//
// Sources: UTF-8 well-formedness is Unicode 15 §3.9 Table 3-7; the replacement policy is the
// "maximal subpart" practice of §3.9 (U+FFFD substitution), the same as Python's
// `bytes.decode("utf-8", errors="replace")`. The byte-level alphabet is `bytes_to_unicode()` of
// OpenAI's GPT-2 encoder.py, used unchanged by Hugging Face ByteLevel and llama.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace minfer::tokenizer {

/// What the bytes at one position of a string are, per Unicode Table 3-7.
struct Utf8Scan {
  enum Kind { valid, incomplete, invalid } kind;
  /// valid: length of the well-formed sequence (1-4). incomplete: bytes present, all a valid prefix
  /// of a sequence cut by the end of the input. invalid: length of the maximal subpart (>= 1) that
  /// one U+FFFD replaces.
  size_t len;
};

/// Classifies the sequence starting at s[pos]; `pos < s.size()` is required.
Utf8Scan utf8_scan(std::string_view s, size_t pos);

/// True when `s` is well-formed UTF-8.
bool utf8_is_valid(std::string_view s);

/// Offset of the first byte that is not part of a well-formed sequence, or npos.
size_t utf8_first_invalid(std::string_view s);

/// `s` with every ill-formed subsequence (including a truncated sequence at the end) replaced by
/// U+FFFD, maximal-subpart policy. Well-formed input is returned unchanged.
std::string utf8_replace_invalid(std::string_view s);

/// Appends code point `cp` (<= 0x10FFFF) as UTF-8.
void utf8_append(std::string& out, char32_t cp);

/// Unicode NFC of `s` (utf8proc). Throws std::invalid_argument naming the byte offset when `s` is
/// not well-formed UTF-8. ASCII input is returned without calling utf8proc.
std::string nfc_normalize(std::string_view s);

/// The GPT-2 byte-level alphabet: byte b -> the UTF-8 text of the code point that stands for it
/// (printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100..U+0143).
const std::array<std::string, 256>& byte_to_unicode();

/// The inverse of byte_to_unicode() for one code point: the byte, or -1 when `cp` is not in the
/// alphabet.
int unicode_to_byte(char32_t cp);

/// Byte-level decoding of a token text: each code point is mapped back to its byte. When any code
/// point is outside the alphabet the raw UTF-8 of `text` is returned instead (Hugging Face's
/// ByteLevel decoder does the same for such tokens). Requires well-formed UTF-8 `text`; ill-formed
/// input is also returned raw.
std::string byte_level_decode(std::string_view text);

/// Byte-level encoding: each byte of `bytes` replaced by its alphabet code point (UTF-8).
std::string byte_level_encode(std::string_view bytes);

}  // namespace minfer::tokenizer
