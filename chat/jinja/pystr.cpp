#include "chat/jinja/pystr.h"

#include <utf8proc.h>

#include <algorithm>

#include "chat/jinja/ast.h"

namespace minfer::jinja::pystr {
namespace {

// Length of the UTF-8 sequence starting with byte c (1 for ill-formed lead bytes).
size_t seq_len(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}

char32_t decode(const std::string& s, size_t i, size_t n) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (n == 1) return c;
  char32_t cp = c & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

std::string encode(char32_t cp) {
  std::string out;
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
  return out;
}

// Python's str.isspace set (bidirectional class WS/B/S or category Zs).
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

struct Char {
  size_t pos, len;
  char32_t cp;
};

std::vector<Char> scan(const std::string& s) {
  std::vector<Char> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = seq_len(s, i);
    out.push_back({i, n, decode(s, i, n)});
    i += n;
  }
  return out;
}

// Characters (code points) of s, counted without materializing them.
size_t count_chars(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += seq_len(s, i)) ++n;
  return n;
}

// scan() for the operations that make a value or a piece of text per character (chars, case maps):
// past kMaxListItems characters they are refused, as a list that long would be.
std::vector<Char> scan_bounded(const std::string& s) {
  if (s.size() > kMaxListItems && count_chars(s) > kMaxListItems)
    throw TemplateError("a string of over " + list_bound() + " (characters) taken character by character");
  return scan(s);
}

// Applies a per-code-point mapping to UTF-8 text (f gives the character's replacement, one or more
// code points), keeping each character's taint on its output bytes.
template <class F>
Text map_chars(const Text& t, F f) {
  Text out;
  const auto cs = scan_bounded(t.s);
  for (size_t k = 0; k < cs.size(); ++k) {
    const Char& c = cs[k];
    const std::string piece = c.len == 1 && c.cp >= 0x80 ? t.s.substr(c.pos, 1) : f(c.cp, k, cs);
    out.append_tainted(piece, t.tainted_at(c.pos));
  }
  return out;
}

std::string mapped(utf8proc_int32_t c) { return encode(static_cast<char32_t>(c)); }

utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }
bool letter(utf8proc_category_t c) {
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT || c == UTF8PROC_CATEGORY_LM ||
         c == UTF8PROC_CATEGORY_LO;
}
// Python's str.isalnum per character (isalpha, or any number: Nd, Nl, No).
bool alnum(utf8proc_category_t c) {
  return letter(c) || c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool is_cased(char32_t c) {
  const auto x = static_cast<utf8proc_int32_t>(c);
  switch (utf8proc_category(x)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: return true;
    default: return utf8proc_tolower(x) != x || utf8proc_toupper(x) != x;
  }
}

// Python's str.upper/title use the full case mappings of SpecialCasing.txt; these are its
// unconditional ones for Latin text where one character becomes several (lower's İ -> i̇ is in
// lower_at). Other characters take their simple mapping (utf8proc).
struct SpecialCase {
  char32_t cp;
  const char* upper;
  const char* title;
};
constexpr SpecialCase kSpecialCases[] = {
    {0xDF, "SS", "Ss"},    {0xFB00, "FF", "Ff"},   {0xFB01, "FI", "Fi"}, {0xFB02, "FL", "Fl"},
    {0xFB03, "FFI", "Ffi"}, {0xFB04, "FFL", "Ffl"}, {0xFB05, "ST", "St"}, {0xFB06, "ST", "St"},
    {0x149, "\u02bcN", "\u02bcN"},
};
const SpecialCase* special_case(char32_t c) {
  for (const SpecialCase& sc : kSpecialCases)
    if (sc.cp == c) return &sc;
  return nullptr;
}

std::string upper_of(char32_t c) {
  if (const SpecialCase* sc = special_case(c)) return sc->upper;
  return mapped(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
std::string title_of(char32_t c) {
  if (const SpecialCase* sc = special_case(c)) return sc->title;
  return mapped(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

// Unicode's Case_Ignorable: marks, format characters, modifier letters and symbols, and the
// word-internal punctuation of Word_Break MidLetter / MidNumLet / Single_Quote.
bool is_case_ignorable(char32_t c) {
  switch (category(c)) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_SK:
      return true;
    default: break;
  }
  switch (c) {
    case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4: case 0x2018: case 0x2019:
    case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
      return true;
    default: return false;
  }
}

// Python's full lowercase of character k: SpecialCasing's unconditional İ -> i̇ and the Final_Sigma
// rule (Σ -> ς after a cased letter and not before one, case-ignorable characters skipped both
// ways), else the simple mapping.
std::string lower_at(const std::vector<Char>& cs, size_t k) {
  const char32_t c = cs[k].cp;
  if (c == 0x130) return "i\u0307";
  if (c == 0x3A3) {
    auto cased_beside = [&](size_t i, int step) {
      for (i += step; i < cs.size(); i += step) {
        if (is_case_ignorable(cs[i].cp)) continue;
        return is_cased(cs[i].cp);
      }
      return false;
    };
    return k > 0 && cased_beside(k, -1) && !cased_beside(k, 1) ? "\u03c2" : "\u03c3";
  }
  return mapped(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

}  // namespace

std::vector<Text> chars(const Text& t) {
  std::vector<Text> out;
  for (const Char& c : scan_bounded(t.s)) out.push_back(t.substr(c.pos, c.len));
  return out;
}

size_t length(const Text& t) { return count_chars(t.s); }

Text span(const Text& t, size_t a, size_t b) {
  const auto cs = scan(t.s);
  const size_t from = a < cs.size() ? cs[a].pos : t.s.size(), to = b < cs.size() ? cs[b].pos : t.s.size();
  return t.substr(from, to - from);
}

std::optional<Text> char_at(const Text& t, int64_t k) {
  if (k < 0) k += static_cast<int64_t>(length(t));
  if (k < 0) return std::nullopt;
  for (size_t i = 0; i < t.s.size();) {
    const size_t n = seq_len(t.s, i);
    if (k-- == 0) return t.substr(i, n);
    i += n;
  }
  return std::nullopt;
}

Text strip(const Text& t, const std::optional<std::string>& set, bool left, bool right) {
  const auto cs = scan(t.s);
  std::vector<char32_t> strip_set;
  if (set)
    for (const Char& c : scan(*set)) strip_set.push_back(c.cp);
  auto strippable = [&](char32_t cp) {
    if (!set) return is_py_space(cp);
    for (char32_t x : strip_set)
      if (x == cp) return true;
    return false;
  };
  size_t a = 0, b = cs.size();
  if (left)
    while (a < b && strippable(cs[a].cp)) ++a;
  if (right)
    while (b > a && strippable(cs[b - 1].cp)) --b;
  if (a == b) return Text();
  const size_t from = cs[a].pos, to = cs[b - 1].pos + cs[b - 1].len;
  return t.substr(from, to - from);
}

std::vector<Text> split(const Text& t, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right) {
  std::vector<Text> out;
  if (sep) {
    if (sep->empty()) throw TemplateError("empty separator");
    if (!from_right) {
      size_t start = 0;
      int64_t n = 0;
      while (maxsplit < 0 || n < maxsplit) {
        const size_t at = t.s.find(*sep, start);
        if (at == std::string::npos) break;
        out.push_back(t.substr(start, at - start));
        start = at + sep->size();
        ++n;
      }
      out.push_back(t.substr(start));
      return out;
    }
    size_t end = t.s.size();
    int64_t n = 0;
    std::vector<Text> rev;
    while (maxsplit < 0 || n < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = t.s.rfind(*sep, end - sep->size());
      if (at == std::string::npos) break;
      rev.push_back(t.substr(at + sep->size(), end - at - sep->size()));
      end = at;
      ++n;
    }
    rev.push_back(t.substr(0, end));
    return {rev.rbegin(), rev.rend()};
  }
  // Whitespace split: runs of whitespace separate, leading/trailing whitespace ignored.
  const auto cs = scan(t.s);
  if (!from_right) {
    size_t k = 0;
    int64_t n = 0;
    while (k < cs.size()) {
      while (k < cs.size() && is_py_space(cs[k].cp)) ++k;
      if (k == cs.size()) break;
      if (maxsplit >= 0 && n == maxsplit) {
        // Python keeps the rest as it is, trailing whitespace included.
        out.push_back(t.substr(cs[k].pos));
        return out;
      }
      const size_t a = k;
      while (k < cs.size() && !is_py_space(cs[k].cp)) ++k;
      out.push_back(t.substr(cs[a].pos, (k < cs.size() ? cs[k].pos : t.s.size()) - cs[a].pos));
      ++n;
    }
    return out;
  }
  std::vector<Text> rev;
  size_t k = cs.size();
  int64_t n = 0;
  while (k > 0) {
    while (k > 0 && is_py_space(cs[k - 1].cp)) --k;
    if (k == 0) break;
    if (maxsplit >= 0 && n == maxsplit) {
      rev.push_back(t.substr(0, cs[k - 1].pos + cs[k - 1].len));
      break;
    }
    const size_t b = k;
    while (k > 0 && !is_py_space(cs[k - 1].cp)) --k;
    rev.push_back(t.substr(cs[k].pos, cs[b - 1].pos + cs[b - 1].len - cs[k].pos));
    ++n;
  }
  return {rev.rbegin(), rev.rend()};
}

std::vector<Text> splitlines(const Text& t, bool keepends) {
  std::vector<Text> out;
  const auto cs = scan(t.s);
  size_t start = 0;
  for (size_t k = 0; k < cs.size(); ++k) {
    const char32_t c = cs[k].cp;
    const bool br = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                    c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!br) continue;
    const size_t end = cs[k].pos;
    size_t next = cs[k].pos + cs[k].len;
    if (c == '\r' && k + 1 < cs.size() && cs[k + 1].cp == '\n') {
      ++k;
      next = cs[k].pos + 1;
    }
    out.push_back(t.substr(start, (keepends ? next : end) - start));
    start = next;
  }
  if (start < t.s.size()) out.push_back(t.substr(start));
  return out;
}

Text replace(const Text& t, const std::string& old, const Text& repl, int64_t count) {
  Text out;
  if (old.empty()) {
    // Python inserts the replacement between every character (and at both ends).
    const auto cs = chars(t);
    int64_t n = 0;
    for (const Text& c : cs) {
      if (count < 0 || n < count) {
        out.append(repl);
        ++n;
      }
      out.append(c);
      if (out.s.size() > kMaxStringBytes) throw TemplateError("replace() made a string over " + string_bound());
    }
    if (count < 0 || n < count) out.append(repl);
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = t.s.find(old, start);
    if (at == std::string::npos) break;
    out.append(t.substr(start, at - start));
    out.append(repl);
    if (out.s.size() > kMaxStringBytes) throw TemplateError("replace() made a string over " + string_bound());
    start = at + old.size();
    ++n;
  }
  out.append(t.substr(start));
  return out;
}

Text upper(const Text& t) {
  return map_chars(t, [](char32_t c, size_t, const std::vector<Char>&) { return upper_of(c); });
}

Text lower(const Text& t) {
  return map_chars(t, [](char32_t, size_t k, const std::vector<Char>& cs) { return lower_at(cs, k); });
}

Text capitalize(const Text& t) {
  return map_chars(t, [](char32_t c, size_t k, const std::vector<Char>& cs) {
    return k == 0 ? title_of(c) : lower_at(cs, k);
  });
}

Text title(const Text& t) {
  // Python: a letter after a non-cased character starts a word (uppercased), others lowercase.
  return map_chars(t, [](char32_t c, size_t k, const std::vector<Char>& cs) {
    const bool prev_cased = k > 0 && is_cased(cs[k - 1].cp);
    return prev_cased ? lower_at(cs, k) : title_of(c);
  });
}

int64_t find(const Text& t, const std::string& sub, bool from_right) {
  const size_t at = from_right ? t.s.rfind(sub) : t.s.find(sub);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(length(t.substr(0, at)));
}

int64_t count(const Text& t, const std::string& sub) {
  if (sub.empty()) return static_cast<int64_t>(length(t)) + 1;
  int64_t n = 0;
  for (size_t at = t.s.find(sub); at != std::string::npos; at = t.s.find(sub, at + sub.size())) ++n;
  return n;
}

bool isspace(const Text& t) {
  const auto cs = scan(t.s);
  if (cs.empty()) return false;
  for (const Char& c : cs)
    if (!is_py_space(c.cp)) return false;
  return true;
}

namespace {
bool cased_without(const Text& t, utf8proc_category_t a, utf8proc_category_t b) {
  bool cased = false;
  for (const Char& c : scan(t.s)) {
    const auto cat = category(c.cp);
    if (cat == a || cat == b) return false;
    cased = cased || is_cased(c.cp);
  }
  return cased;
}
// Numeric_Type=Digit among the No characters (DerivedNumericType.txt).
bool no_digit(char32_t c) {
  return c == 0xB2 || c == 0xB3 || c == 0xB9 || c == 0x2070 || (c >= 0x2074 && c <= 0x2079) || (c >= 0x2080 && c <= 0x2089) ||
         (c >= 0x2460 && c <= 0x2468) || (c >= 0x2474 && c <= 0x247C) || (c >= 0x2488 && c <= 0x2490) || c == 0x24EA ||
         (c >= 0x24F5 && c <= 0x24FD) || c == 0x24FF || (c >= 0x2776 && c <= 0x277E) || (c >= 0x2780 && c <= 0x2788) ||
         (c >= 0x278A && c <= 0x2792) || (c >= 0x1369 && c <= 0x1371) || c == 0x19DA || (c >= 0x1F100 && c <= 0x1F10A);
}
template <class P>
bool all_chars(const Text& t, P p) {
  const auto cs = scan(t.s);
  return !cs.empty() && std::all_of(cs.begin(), cs.end(), [&](const Char& c) { return p(c.cp); });
}
}  // namespace

int64_t word_runs(const Text& t) {
  int64_t runs = 0;
  bool in_word = false;
  for (const Char& c : scan(t.s)) {
    const bool w = c.cp == '_' || alnum(category(c.cp));
    if (w && !in_word) ++runs;
    in_word = w;
  }
  return runs;
}

bool isalpha(const Text& t) { return all_chars(t, [](char32_t c) { return letter(category(c)); }); }
bool isdigit(const Text& t) { return all_chars(t, [](char32_t c) { return category(c) == UTF8PROC_CATEGORY_ND || no_digit(c); }); }
bool isalnum(const Text& t) { return all_chars(t, [](char32_t c) { return alnum(category(c)); }); }
bool islower(const Text& t) { return cased_without(t, UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LT); }
bool isupper(const Text& t) { return cased_without(t, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT); }

}  // namespace minfer::jinja::pystr
