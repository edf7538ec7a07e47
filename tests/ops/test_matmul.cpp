// mul_mat for every weight dtype x f32/f16 activations, awkward sizes, batch broadcast, views.
#include <gtest/gtest.h>

#include <random>

#include "common/op_harness.h"
#include "common/test_util.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/ops.h"
#include "ref.h"
#include "tensor/quants.h"

namespace minfer::test {
namespace {

CpuBackend& cpu() {
  static CpuBackend b(2);
  return b;
}

// Reference: dequantized weights (exact) times the activations as the op defines them: for block
// weights, activations rounded through the weight's vec_dot_type (Q8_0 / Q8_1 / Q8_K), products
// summed in double. What remains is f32 accumulation error.
// Float inputs on a 1/4 grid in [-2, 2]: every f32 product and partial sum of these sizes is
// exact, so a 1x1 output whose terms cancel cannot fail on rounding alone (random normals could:
// nmse is relative, and one cancelling element made it 1.8e-10).
LeafData grid_data() {
  return LeafData([](Tensor& leaf) {
    std::uniform_int_distribution<int> q(-8, 8);
    const int64_t k = leaf.ne[0], rows = leaf.nrows();
    std::vector<float> v(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : v) x = static_cast<float>(q(rng())) / 4.0f;
      quantize_row(leaf.type, v.data(), static_cast<char*>(leaf.data) + r * leaf.row_size(), k);
    }
  });
}

void check_matmul(DType wt, DType at, int64_t K, int64_t M, int64_t N, int64_t a2, int64_t b2, bool grid = false) {
  Tensor *a = nullptr, *b = nullptr;
  LeafData data = grid ? grid_data() : LeafData();
  auto r = run_op(cpu(), [&](Context& c) {
    a = c.new_tensor(wt, {K, M, a2});
    b = c.new_tensor(at, {K, N, b2});
    return ops::mul_mat(c, a, b);
  }, data);
  Nd A(*a), B(*b);
  const DType vt = vec_dot_type(wt);
  if (vt != DType::F32) {
    std::vector<float> row(static_cast<size_t>(K)), back(static_cast<size_t>(K));
    std::vector<uint8_t> q(dtype_row_size(vt, K));
    for (size_t r = 0; r < B.v.size() / static_cast<size_t>(K); ++r) {
      for (int64_t k = 0; k < K; ++k) row[static_cast<size_t>(k)] = static_cast<float>(B.v[r * static_cast<size_t>(K) + static_cast<size_t>(k)]);
      quantize_row_activations(vt, row.data(), q.data(), K);
      dequantize_row(vt, q.data(), back.data(), K);
      for (int64_t k = 0; k < K; ++k) B.v[r * static_cast<size_t>(K) + static_cast<size_t>(k)] = back[static_cast<size_t>(k)];
    }
  }
  std::vector<double> e;
  for (int64_t i2 = 0; i2 < b2; ++i2)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += A.at(k, m, i2 / (b2 / a2)) * B.at(k, n, i2);
        e.push_back(s);
      }
  const double tol = 1e-10;
  expect_close(r.values, e, tol,
               fmt::format("mul_mat {} x {} K={} M={} N={} batch {}/{}", dtype_name(wt), dtype_name(at), K, M, N, a2, b2));
}

class OpMatmulDtype : public ::testing::TestWithParam<DType> {};

TEST_P(OpMatmulDtype, WeightTimesF32AndF16Activations) {
  const DType wt = GetParam();
  for (DType at : {DType::F32, DType::F16}) {
    const int64_t K = dtype_block_size(wt) == 256 ? 512 : 96;
    check_matmul(wt, at, K, 33, 7, 1, 1);
    check_matmul(wt, at, K, 7, 1, 1, 1);  // decode shape
  }
}

INSTANTIATE_TEST_SUITE_P(EveryWeightDtype, OpMatmulDtype,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(OpMatmul, FloatAwkwardSizesAndBatchBroadcast) {
  for (int64_t K : {1, 7, 33})
    for (int64_t M : {1, 7, 33})
      for (int64_t N : {1, 7, 33}) check_matmul(DType::F32, DType::F32, K, M, N, 1, 1, /*grid=*/true);
  check_matmul(DType::F32, DType::F32, 4097, 3, 2, 1, 1, /*grid=*/true);
  check_matmul(DType::F16, DType::F32, 4097, 3, 2, 1, 1, /*grid=*/true);
  check_matmul(DType::F32, DType::F32, 16, 5, 3, 2, 6);  // a broadcast over b's batch (ratio 3)
  check_matmul(DType::Q8_0, DType::F32, 64, 5, 3, 1, 4);
}

TEST(OpMatmul, StridedActivationView) {
  Tensor *a = nullptr, *x = nullptr;
  LeafData data;
  auto r = run_op(cpu(), [&](Context& c) {
    a = c.new_tensor(DType::F32, {7, 5});
    Tensor* base = c.new_tensor(DType::F32, {5, 7});
    x = transpose(c, base);  // [7, 5] with strided rows
    return ops::mul_mat(c, a, x);
  }, data);
  Nd A(*a), X(*x);
  std::vector<double> e;
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t m = 0; m < 5; ++m) {
      double s = 0;
      for (int64_t k = 0; k < 7; ++k) s += A.at(k, m) * X.at(k, n);
      e.push_back(s);
    }
  expect_close(r.values, e, 1e-11, "mul_mat strided b");
}

}  // namespace
}  // namespace minfer::test
