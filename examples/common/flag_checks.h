// CLI11 checks for number flags with short messages. CLI::PositiveNumber and NonNegativeNumber
// report a bad value as "Value 0 not in range 0.000000 to 17976931348623157..." (the whole
// double range, 300 digits); these say "--batch-size: must be >= 1, got 0". Header-only, so
// that minfer-server-load (no model code) can use it too.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>

namespace minfer::examples {

namespace detail {

// The number in `s`, or nullopt when it is not one (CLI11's conversion then reports it).
inline std::optional<double> flag_number(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

inline std::string flag_text(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// A validator of number flags: what `ok` accepts passes (and what is not a number, which
// CLI11's conversion reports); anything else is "must be <want>, got <value>".
template <typename Ok>
CLI::Validator number_check(const std::string& want, Ok ok) {
  return CLI::Validator(
      [want, ok](std::string& s) -> std::string {
        const auto v = flag_number(s);
        return !v || ok(*v) ? "" : "must be " + want + ", got " + s;
      },
      want);
}

}  // namespace detail

/// Accepts numbers >= lo, and `also` when given (a special value: -n's -1 "until the context
/// ends", `also_means` says what it means): "must be -1 (until the context ends) or >= 1, got 0".
inline CLI::Validator at_least(double lo, std::optional<double> also = std::nullopt, const std::string& also_means = "") {
  std::string want = ">= " + detail::flag_text(lo);
  if (also) want = detail::flag_text(*also) + (also_means.empty() ? "" : " (" + also_means + ")") + " or " + want;
  return detail::number_check(want, [lo, also](double v) { return v >= lo || (also && v == *also); });
}

/// Accepts numbers > lo (real-valued flags: a scale, a frequency): "must be > 0, got 0".
inline CLI::Validator above(double lo) {
  return detail::number_check("> " + detail::flag_text(lo), [lo](double v) { return v > lo; });
}

/// Accepts finite numbers (a factor with a meaning for any sign): "must be a finite number, got nan".
inline CLI::Validator finite() {
  return detail::number_check("a finite number", [](double v) { return std::isfinite(v); });
}

/// Accepts numbers <= hi (a probability: min-p above 1 would keep no token): "must be <= 1, got 2".
inline CLI::Validator at_most(double hi) {
  return detail::number_check("<= " + detail::flag_text(hi), [hi](double v) { return v <= hi; });
}

/// -s / --seed: -1 (random) or an integer 0 .. 2^64 - 2. CLI11 would clamp a larger number to
/// 2^64 - 1, the random seed's value, and so silently drop a seed the user asked for.
inline CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s == "-1") return "";
        uint64_t v = 0;
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data(), end, v);
        if (s.empty() || ec != std::errc() || p != end || v == UINT64_MAX)
          return "must be -1 (random) or an integer from 0 to 18446744073709551614, got " + s;
        return "";
      },
      "SEED");
}

}  // namespace minfer::examples
