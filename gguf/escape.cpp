#include "gguf/escape.h"

#include <cstdio>

namespace minfer::gguf {

std::string quote(std::string_view s, size_t max_chars, char q) {
  std::string out;
  const bool cut = s.size() > max_chars;
  if (cut) s = s.substr(0, max_chars);
  out.reserve(s.size() + 8);
  out += q;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == q || ch == '\\') {
      out += '\\';
      out += ch;
      continue;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += q;
  if (cut) out += "...";
  return out;
}

}  // namespace minfer::gguf
