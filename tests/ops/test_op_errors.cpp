// Misuse gives clear errors that name the op and the shapes.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

TEST(OpErrors, ShapeMismatchesNameTheOpAndShapes) {
  Context c;
  Tensor* a = c.new_tensor(DType::F32, {4, 3}, "a");
  Tensor* b = c.new_tensor(DType::F32, {5, 3}, "b");
  auto m = error_of([&] { ops::add(c, a, b); });
  EXPECT_NE(m.find("ADD"), std::string::npos) << m;
  EXPECT_NE(m.find("[5, 3, 1, 1]"), std::string::npos) << m;
  m = error_of([&] { ops::mul_mat(c, a, b); });
  EXPECT_NE(m.find("MUL_MAT"), std::string::npos) << m;
  EXPECT_NE(m.find("[4, 3, 1, 1]"), std::string::npos) << m;
  m = error_of([&] { ops::swiglu(c, a, b); });
  EXPECT_NE(m.find("SWIGLU"), std::string::npos) << m;
  m = error_of([&] { ops::rms_norm(c, a, 1e-6f, b); });
  EXPECT_NE(m.find("RMS_NORM"), std::string::npos) << m;
  m = error_of([&] { ops::concat(c, a, c.new_tensor(DType::F32, {4, 2, 2}), 1); });
  EXPECT_NE(m.find("CONCAT"), std::string::npos) << m;
  Tensor* q = c.new_tensor(DType::F32, {64, 3, 2});
  Tensor* k = c.new_tensor(DType::F16, {64, 2, 10});
  Tensor* idx = c.new_tensor(DType::I32, {2});
  m = error_of([&] { ops::attention(c, q, k, k, idx, idx, c.new_tensor(DType::I32, {10, 1}), 1, 1.0f); });
  EXPECT_NE(m.find("n_head 3 is not a multiple of n_head_kv 2"), std::string::npos) << m;
  m = error_of([&] { ops::get_rows(c, a, b); });
  EXPECT_NE(m.find("GET_ROWS"), std::string::npos) << m;
  EXPECT_NE(m.find("i32"), std::string::npos) << m;
}

TEST(OpErrors, ViewOutsideItsSource) {
  Context c;
  Tensor* a = c.new_tensor(DType::F32, {4, 3}, "src");
  auto m = error_of([&] { view(c, a, {4, 4}, {16}, 0); });
  EXPECT_NE(m.find("outside"), std::string::npos) << m;
  EXPECT_NE(m.find("'src'"), std::string::npos) << m;
  EXPECT_THROW(slice(c, a, 1, 2, 2), OpError);
  EXPECT_THROW(reshape(c, a, {5, 2}), OpError);
  EXPECT_THROW(reshape(c, transpose(c, a), {12}), OpError);
  EXPECT_THROW(permute(c, a, 0, 0, 1, 2), OpError);
  Tensor* qb = c.new_tensor(DType::Q4_0, {64, 2});
  EXPECT_THROW(slice(c, qb, 0, 16, 32), OpError);  // not block aligned
}

TEST(OpErrors, BadDtypesAndBlockSizes) {
  Context c;
  EXPECT_THROW(c.new_tensor(DType::Q4_K, {100}), std::invalid_argument);  // not a multiple of 256
  EXPECT_THROW(c.new_tensor(DType::F32, {-1}), std::invalid_argument);
  Tensor* a = c.new_tensor(DType::F32, {4});
  EXPECT_THROW(ops::cast(c, a, DType::Q8_0), OpError);
  EXPECT_THROW(ops::rope(c, c.new_tensor(DType::F32, {6, 1, 2}), c.new_tensor(DType::I32, {3}), {}), OpError);
}

}  // namespace
}  // namespace minfer::test
