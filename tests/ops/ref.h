// Plain double-precision reference loops for the op tests (independent of the kernels).
#pragma once

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

}  // namespace minfer::test
