#include "chat/jinja/lexer.h"

#include <cctype>
#include <cstring>

#include "chat/jinja/value.h"

namespace minfer::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

[[noreturn]] void fail(int line, const std::string& what) {
  throw TemplateError("chat template line " + std::to_string(line) + ": " + what);
}

int count_lines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

void append_utf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes a string literal body the way Jinja2 does (Python's "unicode-escape").
std::string decode_string(std::string_view body, int line) {
  std::string out;
  for (size_t k = 0; k < body.size(); ++k) {
    const char c = body[k];
    if (c != '\\' || k + 1 >= body.size()) {
      out += c;
      continue;
    }
    const char e = body[++k];
    auto hex = [&](size_t n) {
      unsigned long v = 0;
      for (size_t j = 1; j <= n; ++j) {
        const char h = k + j < body.size() ? body[k + j] : '\0';
        if (!std::isxdigit(static_cast<unsigned char>(h))) fail(line, "bad \\x/\\u escape in a string literal");
        v = v * 16 + static_cast<unsigned long>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      k += n;
      return v;
    };
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
        // \ooo: one to three octal digits, a code point up to 0o777 (Python).
        unsigned long v = static_cast<unsigned long>(e - '0');
        for (int j = 0; j < 2 && k + 1 < body.size() && body[k + 1] >= '0' && body[k + 1] <= '7'; ++j)
          v = v * 8 + static_cast<unsigned long>(body[++k] - '0');
        append_utf8(out, v);
        break;
      }
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;  // line continuation
      case 'x': append_utf8(out, hex(2)); break;
      case 'u': append_utf8(out, hex(4)); break;
      case 'U': append_utf8(out, hex(8)); break;
      default: out += '\\'; out += e; break;  // Python keeps unknown escapes as written
    }
  }
  return out;
}

struct TagEnd {
  bool found = false;
  size_t len = 0;   // length of the delimiter including a sign
  char sign = 0;    // '-', '+' or 0
};

// Is there a tag end ("%}" / "}}" / "#}", optionally signed) at pos?
TagEnd match_end(std::string_view src, size_t pos, char close) {
  const char c = src[pos];
  if ((c == '-' || c == '+') && pos + 2 < src.size() && src[pos + 1] == close && src[pos + 2] == '}') {
    if (c == '+' && close == '}') return {};  // "+}}" is not a variable end in Jinja2
    return {true, 3, c};
  }
  if (c == close && pos + 1 < src.size() && src[pos + 1] == '}') return {true, 2, 0};
  return {};
}

// Lexes the inside of one tag from `pos`; returns the tokens and advances pos past the end
// delimiter, reporting its sign.
std::vector<Token> lex_tag(std::string_view src, size_t& pos, char close, int& line, char& end_sign) {
  std::vector<Token> toks;
  const int start_line = line;
  int depth = 0;  // open brackets: "}}" inside a dict literal does not end the tag (Jinja2's balancing)
  while (true) {
    while (pos < src.size() && is_space(src[pos])) {
      line += src[pos] == '\n';
      ++pos;
    }
    if (pos >= src.size()) fail(start_line, close == '%' ? "unterminated block tag '{%'" : "unterminated '{{'");
    if (TagEnd e = depth == 0 ? match_end(src, pos, close) : TagEnd{}; e.found) {
      pos += e.len;
      end_sign = e.sign;
      Token t;
      t.kind = Token::Kind::end;
      t.line = line;
      toks.push_back(t);
      return toks;
    }
    Token t;
    t.line = line;
    const char c = src[pos];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos;
      while (e < src.size() && (std::isalnum(static_cast<unsigned char>(src[e])) || src[e] == '_')) ++e;
      t.kind = Token::Kind::name;
      t.text = std::string(src.substr(pos, e - pos));
      pos = e;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t e = pos;
      auto digits = [&] {
        while (e < src.size() && (std::isdigit(static_cast<unsigned char>(src[e])) || src[e] == '_')) ++e;
      };
      digits();
      bool is_float = false;
      if (e + 1 < src.size() && src[e] == '.' && std::isdigit(static_cast<unsigned char>(src[e + 1]))) {
        ++e;
        digits();
        is_float = true;
      }
      if (e < src.size() && (src[e] == 'e' || src[e] == 'E')) {
        size_t x = e + 1;
        if (x < src.size() && (src[x] == '+' || src[x] == '-')) ++x;
        if (x < src.size() && std::isdigit(static_cast<unsigned char>(src[x]))) {
          e = x;
          digits();
          is_float = true;
        }
      }
      std::string num;
      for (char d : src.substr(pos, e - pos))
        if (d != '_') num += d;
      if (is_float) {
        t.kind = Token::Kind::floating;
        t.float_value = std::stod(num);
      } else {
        t.kind = Token::Kind::integer;
        try {
          t.int_value = std::stoll(num);
        } catch (const std::exception&) {
          fail(line, "integer literal " + num + " is out of range");
        }
      }
      t.text = num;
      pos = e;
    } else if (c == '\'' || c == '"') {
      size_t e = pos + 1;
      while (e < src.size() && src[e] != c) {
        if (src[e] == '\\') ++e;
        ++e;
      }
      if (e >= src.size()) fail(line, "unterminated string literal");
      const std::string_view body = src.substr(pos + 1, e - pos - 1);
      t.kind = Token::Kind::string;
      t.text = decode_string(body, line);
      line += count_lines(body);
      pos = e + 1;
    } else {
      static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
      t.kind = Token::Kind::op;
      for (const char* op : two) {
        if (src.substr(pos, 2) == op) t.text = op;
      }
      if (t.text.empty()) {
        if (std::strchr("+-/*%~[](){}<>=.:|,;", c) == nullptr)
          fail(line, std::string("unexpected character '") + c + "' in a tag");
        t.text = std::string(1, c);
      }
      pos += t.text.size();
      if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
      if ((t.text == ")" || t.text == "]" || t.text == "}") && depth > 0) --depth;
    }
    toks.push_back(std::move(t));
  }
}

}  // namespace

std::vector<Piece> lex(std::string_view src, const LexOptions& opt) {
  // Jinja2 drops one trailing newline of the source (keep_trailing_newline=False).
  if (src.ends_with("\r\n")) src.remove_suffix(2);
  else if (src.ends_with("\n")) src.remove_suffix(1);
  std::vector<Piece> out;
  size_t pos = 0;
  int line = 1;
  bool line_starting = true;  // the previous match ended with a newline (Jinja2's line_starting)
  while (pos < src.size()) {
    // The earliest tag start.
    size_t tag = std::string_view::npos;
    for (size_t k = src.find('{', pos); k != std::string_view::npos; k = src.find('{', k + 1)) {
      if (k + 1 < src.size() && (src[k + 1] == '{' || src[k + 1] == '%' || src[k + 1] == '#')) {
        tag = k;
        break;
      }
    }
    std::string text(src.substr(pos, tag == std::string_view::npos ? std::string_view::npos : tag - pos));
    const int text_line = line;
    line += count_lines(text);
    if (tag == std::string_view::npos) {
      if (!text.empty()) out.push_back({Piece::Kind::text, text, {}, text_line});
      break;
    }
    const char kind = src[tag + 1];
    size_t p = tag + 2;
    char sign = 0;
    if (p < src.size() && (src[p] == '-' || src[p] == '+')) sign = src[p++];
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0 && is_space(text[e - 1])) --e;
      text.resize(e);
    } else if (sign != '+' && opt.lstrip_blocks && kind != '{') {
      const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
        bool blank = true;
        for (size_t k = l_pos; k < text.size(); ++k) blank = blank && is_space(text[k]);
        if (blank) text.resize(l_pos);
      }
    }
    if (!text.empty()) out.push_back({Piece::Kind::text, text, {}, text_line});

    char end_sign = 0;
    bool block_like = kind != '{';
    if (kind == '#') {
      // A comment: find "#}" (signed or not).
      size_t e = p;
      TagEnd te;
      for (; e < src.size(); ++e) {
        te = match_end(src, e, '#');
        if (te.found) break;
      }
      if (!te.found) fail(line, "unterminated comment '{#'");
      line += count_lines(src.substr(p, e - p));
      pos = e + te.len;
      end_sign = te.sign;
    } else {
      Piece piece;
      piece.kind = kind == '%' ? Piece::Kind::statement : Piece::Kind::output;
      piece.line = line;
      pos = p;
      piece.tokens = lex_tag(src, pos, kind == '%' ? '%' : '}', line, end_sign);
      if (piece.kind == Piece::Kind::statement && piece.tokens.size() == 1) fail(piece.line, "empty block tag '{% %}'");
      if (piece.kind == Piece::Kind::output && piece.tokens.size() == 1) fail(piece.line, "empty expression '{{ }}'");
      out.push_back(std::move(piece));
    }
    // What follows the tag: "-" strips all whitespace; trim_blocks eats one newline after block
    // tags and comments (not after "+%}" and not after "}}").
    line_starting = false;
    if (end_sign == '-') {
      while (pos < src.size() && is_space(src[pos])) {
        line += src[pos] == '\n';
        line_starting = src[pos] == '\n';
        ++pos;
      }
    } else if (block_like && end_sign != '+' && opt.trim_blocks && pos < src.size() && src[pos] == '\n') {
      ++pos;
      ++line;
      line_starting = true;
    }
  }
  return out;
}

}  // namespace minfer::jinja
