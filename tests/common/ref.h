// Plain double-precision reference helpers for the op tests (independent of the kernels): inputs
// as doubles in logical order, and the roundings an op's definition includes, written here in
// double (not the library's conversion code).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <vector>

#include "common/test_util.h"
#include "tensor/tensor.h"

namespace minfer::test {

/// A host tensor's values as doubles, indexed [i3][i2][i1][i0] in logical (not memory) order.
struct Nd {
  std::array<int64_t, 4> ne;
  std::vector<double> v;
  explicit Nd(const Tensor& t) : ne(t.ne) {
    auto f = to_f32(t);
    v.assign(f.begin(), f.end());
  }
  Nd(std::array<int64_t, 4> shape) : ne(shape), v(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3])) {}
  double& at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    return v[static_cast<size_t>(((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0)];
  }
  double at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
    return v[static_cast<size_t>(((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0)];
  }
};

inline std::vector<int32_t> ints(const Tensor& t) {
  std::vector<int32_t> r(static_cast<size_t>(t.nelements()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<const int32_t*>(t.data)[i];
  return r;
}

/// The nearest value of a binary float with `frac_bits` fraction bits and smallest normal exponent
/// `min_exp` (ties to even; subnormals on the fixed grid below), +-inf past `max_finite`.
inline double round_binary(double x, int frac_bits, int min_exp, double max_finite) {
  if (!std::isfinite(x) || x == 0) return x;
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| = m 2^e, m in [0.5, 1): leading bit 2^(e-1)
  const double step = std::ldexp(1.0, std::max(e - 1, min_exp) - frac_bits);
  const double r = std::nearbyint(std::fabs(x) / step) * step;  // exact in double for f32 inputs
  return std::copysign(r > max_finite ? INFINITY : r, x);
}
/// IEEE half: what f32 -> f16 conversion gives (round to nearest even).
inline double round_f16(double x) { return round_binary(x, 10, -14, 65504.0); }
/// bfloat16: f32 -> bf16 rounded to nearest even.
inline double round_bf16(double x) { return round_binary(x, 7, -126, 3.3895313892515355e38); }

}  // namespace minfer::test
