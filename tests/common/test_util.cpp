#include "common/test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quants.h"

namespace minfer::test {

std::filesystem::path fixtures_dir() {
  if (const char* e = std::getenv("MINFER_FIXTURES"); e && *e) return e;
  return MINFER_FIXTURES_DEFAULT;
}

std::filesystem::path fixture(const std::string& relative) {
  auto p = fixtures_dir() / relative;
  return std::filesystem::exists(p) ? p : std::filesystem::path();
}

uint64_t seed() {
  static const uint64_t s = [] {
    if (const char* e = std::getenv("MINFER_TEST_SEED"); e && *e) return static_cast<uint64_t>(std::strtoull(e, nullptr, 10));
    return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ static_cast<uint64_t>(std::random_device{}());
  }();
  return s;
}

std::mt19937_64& rng() {
  static std::mt19937_64 g(seed());
  return g;
}

std::vector<float> randn(size_t n, float stddev) {
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  if (n > 0 && v[0] == 0.0f) v[0] = stddev;  // never all zero
  return v;
}

std::vector<float> randu(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

int64_t rand_int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng()); }

void fill_random(Tensor& t, int32_t int_hi) {
  if (!t.is_contiguous()) throw std::invalid_argument("fill_random needs a contiguous tensor");
  const int64_t n = t.nelements();
  if (t.type == DType::I32) {
    auto* p = static_cast<int32_t*>(t.data);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(rand_int(0, int_hi - 1));
    return;
  }
  auto v = randn(static_cast<size_t>(n));
  const int64_t rows = t.nrows(), k = t.ne[0];
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(t.type, v.data() + r * k, static_cast<char*>(t.data) + r * t.row_size(), k);
}

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.nelements()));
  size_t k = 0;
  const bool rowc = t.rows_contiguous();
  std::vector<float> row(static_cast<size_t>(t.ne[0]));
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
        const char* r = static_cast<const char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
        if (rowc) {
          dequantize_row(t.type, r, row.data(), t.ne[0]);
        } else {
          for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) {
            const char* e = r + i0 * t.nb[0];
            switch (t.type) {
              case DType::F32: std::memcpy(&row[static_cast<size_t>(i0)], e, 4); break;
              case DType::F16: row[static_cast<size_t>(i0)] = f16_to_f32(*reinterpret_cast<const uint16_t*>(e)); break;
              case DType::BF16: row[static_cast<size_t>(i0)] = bf16_to_f32(*reinterpret_cast<const uint16_t*>(e)); break;
              case DType::I32: row[static_cast<size_t>(i0)] = static_cast<float>(*reinterpret_cast<const int32_t*>(e)); break;
              default: throw std::invalid_argument("to_f32: strided block tensor");
            }
          }
        }
        for (float x : row) out[k++] = x;
      }
  return out;
}

}  // namespace minfer::test
