#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

namespace minfer::tokenizer {
namespace {

// Table 3-7: the allowed range of the second byte depends on the lead byte; later bytes are
// always 80..BF.
struct LeadInfo {
  uint8_t n;        // total sequence length, 0 for a byte that cannot start a sequence
  uint8_t lo, hi;   // allowed range of the second byte
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

struct ByteLevelTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 0x144> to_byte;  // every alphabet code point is < U+0144
};

const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables tables = [] {
    ByteLevelTables t;
    t.to_byte.fill(-1);
    // bytes_to_unicode(): printable ranges keep their code point, the rest get 256, 257, ...
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
      utf8_append(t.to_unicode[b], cp);
      t.to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

Utf8Scan utf8_scan(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const LeadInfo li = lead_info(p[pos]);
  if (li.n == 0) return {Utf8Scan::invalid, 1};
  for (size_t k = 1; k < li.n; ++k) {
    if (pos + k >= s.size()) return {Utf8Scan::incomplete, k};
    const uint8_t c = p[pos + k];
    const uint8_t lo = k == 1 ? li.lo : 0x80;
    const uint8_t hi = k == 1 ? li.hi : 0xBF;
    if (c < lo || c > hi) return {Utf8Scan::invalid, k};
  }
  return {Utf8Scan::valid, li.n};
}

size_t utf8_first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Scan sc = utf8_scan(s, i);
    if (sc.kind != Utf8Scan::valid) return i;
    i += sc.len;
  }
  return std::string_view::npos;
}

bool utf8_is_valid(std::string_view s) { return utf8_first_invalid(s) == std::string_view::npos; }

std::string utf8_replace_invalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Scan sc = utf8_scan(s, i);
    if (sc.kind == Utf8Scan::valid) {
      out.append(s.substr(i, sc.len));
    } else {
      out.append(kReplacement);
    }
    i += sc.len;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string nfc_normalize(std::string_view s) {
  bool ascii = true;
  for (char c : s) {
    if (static_cast<uint8_t>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(s);
  if (const size_t bad = utf8_first_invalid(s); bad != std::string_view::npos) {
    throw std::invalid_argument("tokenizer: input text is not valid UTF-8 (byte offset " +
                                std::to_string(bad) + ")");
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(UTF8PROC_STABLE |
                                                                         UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> guard(out, &std::free);
  if (n < 0) {
    throw std::invalid_argument(std::string("tokenizer: NFC normalization failed: ") +
                                utf8proc_errmsg(n));
  }
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

const std::array<std::string, 256>& byte_to_unicode() { return byte_level_tables().to_unicode; }

int unicode_to_byte(char32_t cp) {
  const auto& t = byte_level_tables().to_byte;
  return cp < t.size() ? t[cp] : -1;
}

std::string byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const Utf8Scan sc = utf8_scan(text, i);
    if (sc.kind != Utf8Scan::valid) return std::string(text);
    char32_t cp;
    switch (sc.len) {
      case 1: cp = p[i]; break;
      case 2: cp = (char32_t(p[i] & 0x1F) << 6) | (p[i + 1] & 0x3F); break;
      default: return std::string(text);  // every alphabet code point is < U+0800
    }
    const int b = unicode_to_byte(cp);
    if (b < 0) return std::string(text);
    out.push_back(static_cast<char>(b));
    i += sc.len;
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  const auto& t = byte_to_unicode();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out.append(t[static_cast<uint8_t>(c)]);
  return out;
}

}  // namespace minfer::tokenizer
