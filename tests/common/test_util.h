// Shared test utilities: seeded random inputs, fixture lookup.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace minfer {
/// GoogleTest prints a DType parameter by name (not as raw bytes).
inline void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
}  // namespace minfer

namespace minfer::test {

/// The message of the exception f() throws, "" when it throws none (error-path tests look for the
/// op name and the shapes in it).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// The fixtures folder: $MINFER_FIXTURES, else the configure-time default (../shared/fixtures).
std::filesystem::path fixtures_dir();

/// Path of a fixture file, or an empty path when the fixtures are absent (callers GTEST_SKIP).
std::filesystem::path fixture(const std::string& relative);

/// A generator seeded from the test name and $MINFER_TEST_SEED (printed on failure by callers),
/// so every run draws fresh inputs unless the seed is pinned.
std::mt19937_64& rng();
uint64_t seed();

/// n values from N(0, stddev) (never all zero).
std::vector<float> randn(size_t n, float stddev = 1.0f);
/// n values uniform in [lo, hi).
std::vector<float> randu(size_t n, float lo, float hi);
int64_t rand_int(int64_t lo, int64_t hi);  // inclusive

/// Fills a host tensor (data set) with random values suited to its dtype: floats ~N(0,1) stored
/// in the dtype, block types via quantize_row of N(0,1), I32 uniform in [0, int_hi).
void fill_random(Tensor& t, int32_t int_hi = 100);

/// Reads any float/block tensor (host data, any strides) into f32 in logical order.
std::vector<float> to_f32(const Tensor& t);

}  // namespace minfer::test
