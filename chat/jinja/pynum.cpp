#include "chat/jinja/pynum.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace minfer::jinja::pynum {
namespace {

bool is_py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || c == '\x1c' || c == '\x1d' || c == '\x1e' || c == '\x1f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_py_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_py_space(s.back())) s.remove_suffix(1);
  return s;
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

// Removes the single underscores between digits of `s` (digits per `is_digit`); false when an
// underscore is leading, trailing, doubled or next to a non-digit.
template <typename IsDigit>
bool strip_underscores(std::string_view s, std::string& out, IsDigit is_digit) {
  out.clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') {
      out += s[i];
      continue;
    }
    if (i == 0 || i + 1 == s.size() || !is_digit(s[i - 1]) || !is_digit(s[i + 1])) return false;
  }
  return true;
}

bool ieq(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return true;
}

}  // namespace

IntParse parse_int(const std::string& str, int base) {
  const IntParse invalid{IntParse::invalid, 0};
  if (base != 0 && (base < 2 || base > 36)) return invalid;
  std::string_view s = trim(str);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  const bool auto_base = base == 0;
  bool prefixed = false;
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
    const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == 0 || base == pb)) {
      base = pb;
      prefixed = true;
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);  // int("0x_10", 16) is 16
    }
  }
  if (base == 0) base = 10;
  std::string digits;
  if (s.empty() || !strip_underscores(s, digits, [&](char c) { return digit_value(c) < base; })) return invalid;
  // Base 0 takes no leading zeros on a nonzero decimal (int("010", 0) raises; int("00", 0) is 0).
  if (auto_base && !prefixed && digits.size() > 1 && digits[0] == '0' && digits.find_first_not_of('0') != std::string::npos)
    return invalid;
  uint64_t v = 0;
  const uint64_t limit = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  bool over = false;
  for (char c : digits) {
    const int d = digit_value(c);
    if (d >= base) return invalid;
    if (!over && v > (limit - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) over = true;
    if (!over) v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  if (over) return {IntParse::overflow, 0};
  return {IntParse::ok, neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v)};
}

std::optional<double> parse_float(const std::string& str) {
  std::string_view s = trim(str);
  std::string_view body = s;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  const bool neg = !s.empty() && s[0] == '-';
  if (ieq(body, "inf") || ieq(body, "infinity")) return neg ? -HUGE_VAL : HUGE_VAL;
  if (ieq(body, "nan")) return neg ? -std::nan("") : std::nan("");
  // digits [. digits] [e [sign] digits], or . digits: only these characters, checked here so that
  // strtod's hexadecimal and "inf"/"nan" spellings never get through.
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, int_digits = 0, frac_digits = 0;
  const auto run = [&](size_t& count) {
    while (i < body.size() && (is_digit(body[i]) || body[i] == '_')) {
      if (body[i] != '_') ++count;
      ++i;
    }
  };
  run(int_digits);
  if (i < body.size() && body[i] == '.') {
    ++i;
    run(frac_digits);
  }
  if (int_digits + frac_digits == 0) return std::nullopt;
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    ++i;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
    size_t exp_digits = 0;
    run(exp_digits);
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != body.size()) return std::nullopt;
  std::string clean;
  if (!strip_underscores(s, clean, is_digit)) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

double round_float(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits > 340) return x;  // past every digit a double has
  if (ndigits >= 0) {
    // printf rounds the exact binary value to nearest, ties to even: Python's correctly rounded
    // round() (it goes through dtoa's mode 3 the same way).
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  if (ndigits < -308) return std::copysign(0.0, x);
  const double m = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / m) * m;
}

std::optional<int64_t> round_int(int64_t v, int64_t ndigits) {
  if (ndigits >= 0) return v;
  if (ndigits < -18) {
    // 10^19 and up exceed int64: v rounds to 0 unless it is past half of 10^19.
    if (ndigits == -19 && (v > 5'000'000'000'000'000'000LL || v < -5'000'000'000'000'000'000LL)) return std::nullopt;
    return 0;
  }
  int64_t m = 1;
  for (int64_t k = 0; k < -ndigits; ++k) m *= 10;
  int64_t q = v / m, r = v % m;  // truncated: r has v's sign
  const int64_t twice = 2 * (r < 0 ? -r : r);
  if (twice > m || (twice == m && q % 2 != 0)) q += v < 0 ? -1 : 1;
  if ((q > 0 && q > INT64_MAX / m) || (q < 0 && q < INT64_MIN / m)) return std::nullopt;
  return q * m;
}

}  // namespace minfer::jinja::pynum
