// Python's number conversions as Jinja2's filters use them (jinja2/filters.py do_int, do_float,
// do_round): int(str, base), float(str) and round(x, ndigits), on the values minfer's Jinja has
// (int64 and double).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace minfer::jinja::pynum {

/// The outcome of int(s, base): `ok` with the value, `invalid` where Python raises ValueError,
/// `overflow` where Python would return an integer outside int64.
struct IntParse {
  enum Status { ok, invalid, overflow } status;
  int64_t value;
};

/// int(s, base) on a str: whitespace around, an optional sign, digits of `base` (2..36) with single
/// underscores between them; the prefix 0x / 0o / 0b where base is 16 / 8 / 2, or base 0 (the
/// prefix picks the base; no leading zeros on a nonzero decimal). Any other base is `invalid`.
IntParse parse_int(const std::string& s, int base);

/// float(s) on a str: whitespace around, an optional sign, then "inf", "infinity" or "nan" (any
/// case), or decimal digits with single underscores between them, an optional fraction and an
/// optional exponent. No hexadecimal (C's strtod takes "0x10", Python does not). Out-of-range
/// magnitudes give +-inf or 0, as in Python.
std::optional<double> parse_float(const std::string& s);

/// round(x, ndigits) for a float: correctly rounded to ndigits decimals, halves to even on the
/// exact binary value (round(2.675, 2) is 2.67: the double is below 2.675). inf and nan unchanged.
double round_float(double x, int64_t ndigits);

/// round(v, ndigits) for an int: v itself for ndigits >= 0, else v rounded to a multiple of
/// 10^-ndigits, halves to even (round(25, -1) is 20). nullopt when that leaves int64.
std::optional<int64_t> round_int(int64_t v, int64_t ndigits);

}  // namespace minfer::jinja::pynum
