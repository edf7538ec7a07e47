// MUL_MAT on CUDA against the CPU: every weight dtype x f32/f16 activations, the decode sizes
// (N <= 64: the tensor-core MMQ, N <= 16: MMVQ / matvec) and the GEMM sizes (cuBLAS), awkward K/M, batch broadcast,
// strided activations, weight row slices (the concatenated wq|wk|wv views) and the chunked
// dequantization of the GEMM path.
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

void check(DType wt, DType at, int64_t K, int64_t M, int64_t N, int64_t a2 = 1, int64_t b2 = 1) {
  LeafData data;
  compare_cpu_cuda(
      [&](Context& c) { return ops::mul_mat(c, c.new_tensor(wt, {K, M, a2}), c.new_tensor(at, {K, N, b2})); }, data,
      cuda_tolerance(wt), fmt::format("mul_mat {} x {} K={} M={} N={} batch {}/{}", dtype_name(wt), dtype_name(at), K, M, N, a2, b2));
}

class CudaMatmul : public ::testing::TestWithParam<DType> {};

TEST_P(CudaMatmul, DecodeAndGemmSizesBothActivationTypes) {
  MINFER_REQUIRE_GPU();
  const DType wt = GetParam();
  const int64_t K = dtype_block_size(wt) == 256 ? 512 : 96;
  for (DType at : {DType::F32, DType::F16})
    for (int64_t N : {1, 2, 7, 8, 9, 16, 17, 33, 64, 65}) check(wt, at, K, 37, N);
  check(wt, DType::F32, K * 3, 300, 1);   // several units per lane
  check(wt, DType::F32, K, 5, 3, 2, 6);   // a broadcast over b's batch (ratio 3)
  check(wt, DType::F32, K, 5, 12, 2, 4);  // the same through the GEMM path
}

INSTANTIATE_TEST_SUITE_P(EveryWeightDtype, CudaMatmul,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaMatmulShapes, FloatAwkwardSizes) {
  MINFER_REQUIRE_GPU();
  for (int64_t K : {1, 7, 33})
    for (int64_t M : {1, 7, 33})
      for (int64_t N : {1, 7, 33}) check(DType::F32, DType::F32, K, M, N);
  for (DType wt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t N : {1, 2, 17}) check(wt, DType::F32, 4097, 3, N);
}

TEST(CudaMatmulShapes, StridedActivationsAndWeightRowSlices) {
  MINFER_REQUIRE_GPU();
  for (DType wt : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K})
    for (int64_t N : {1, 5, 20}) {
      const int64_t K = wt == DType::Q4_K ? 256 : 64;
      LeafData data;
      compare_cpu_cuda(
          [&](Context& c) {
            Tensor* w = c.new_tensor(wt, {K, 50});
            Tensor* a = slice(c, w, 1, 13, 21);  // rows 13..33, as wk inside wq|wk|wv
            Tensor* base = c.new_tensor(DType::F32, {N, K});
            return ops::mul_mat(c, a, transpose(c, base));  // [K, N] with strided rows
          },
          data, cuda_tolerance(wt), fmt::format("mul_mat slice {} x transposed N={}", dtype_name(wt), N));
    }
}

TEST(CudaMatmulShapes, ChunkedDequantizationGemm) {
  MINFER_REQUIRE_GPU();
  CudaOptions o;
  o.gemm_dequant_chunk = 33280;  // 256-wide rows: chunks of 128, 128, 44 rows
  CudaBackend small_chunks(0, o);
  for (DType wt : {DType::Q4_K, DType::Q6_K, DType::Q5_0}) {
    const int64_t K = 256, M = 300, N = 16;
    auto build = [&](Context& c) { return ops::mul_mat(c, c.new_tensor(wt, {K, M}), c.new_tensor(DType::F32, {K, N})); };
    LeafData data;
    auto ref = run_op(cpu(), build, data);
    auto got = run_op(small_chunks, build, data);
    expect_close(got.values, ref.values, cuda_tolerance(wt), fmt::format("chunked GEMM {}", dtype_name(wt)));
  }
}

}  // namespace
}  // namespace minfer::test
