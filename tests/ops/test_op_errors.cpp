// Misuse gives clear errors that name the op and the shapes; bad runtime values (ids, cells,
// expert ids) are OpErrors naming the value; RoPE parameters round-trip through op params and bad
// ones are rejected. (Op results are checked by the op cases: test_backend_ops.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_harness.h"
#include "common/test_util.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

CpuBackend& cpu() {
  static CpuBackend b(2);
  return b;
}

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

TEST(OpErrors, GetRowsRejectsOutOfRangeId) {
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = 11;
    else fill_random(leaf);
  });
  try {
    run_op(cpu(), [&](Context& c) {
      return ops::get_rows(c, c.new_tensor(DType::F32, {8, 11}), c.new_tensor(DType::I32, {1}));
    }, data);
    FAIL() << "no error";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("id 11"), std::string::npos) << e.what();
  }
}

TEST(OpErrors, KvStoreCellPastTheCache) {
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = 8;
    else fill_random(leaf);
  });
  EXPECT_THROW(run_op(cpu(), [&](Context& c) {
    return ops::kv_store(c, c.new_tensor(DType::F16, {32, 1, 8}), c.new_tensor(DType::F32, {32, 1, 1}),
                         c.new_tensor(DType::I32, {1}));
  }, data), OpError);
}

TEST(OpErrors, MoeBadShapesAndDtypesNameTheOp) {
  Context c;
  Tensor* as = c.new_tensor(DType::F16, {64, 16, 4}, "exps");
  Tensor* ids = c.new_tensor(DType::I32, {2, 5}, "ids");
  Tensor* x = c.new_tensor(DType::F32, {64, 1, 5}, "x");
  EXPECT_NO_THROW(ops::mul_mat_id(c, as, ids, x));
  auto m = error_of([&] { ops::mul_mat_id(c, as, ids, c.new_tensor(DType::F32, {32, 1, 5})); });
  EXPECT_NE(m.find("MUL_MAT_ID: inner dims differ"), std::string::npos) << m;
  m = error_of([&] { ops::mul_mat_id(c, as, ids, c.new_tensor(DType::F32, {64, 1, 4})); });
  EXPECT_NE(m.find("n_tokens = 5"), std::string::npos) << m;
  m = error_of([&] { ops::mul_mat_id(c, as, ids, c.new_tensor(DType::F32, {64, 3, 5})); });
  EXPECT_NE(m.find("1 or k = 2"), std::string::npos) << m;
  m = error_of([&] { ops::mul_mat_id(c, as, c.new_tensor(DType::F32, {2, 5}), x); });
  EXPECT_NE(m.find("ids"), std::string::npos) << m;
  m = error_of([&] { ops::mul_mat_id(c, c.new_tensor(DType::F16, {64, 16, 2, 2}), ids, x); });
  EXPECT_NE(m.find("must be 3-D"), std::string::npos) << m;
  m = error_of([&] { ops::mul_mat_id(c, as, c.new_tensor(DType::I32, {2, 5, 2}), x); });
  EXPECT_NE(m.find("must be 2-D"), std::string::npos) << m;
  m = error_of([&] { ops::mul_mat_id(c, c.new_tensor(DType::I32, {64, 16, 4}), ids, x); });
  EXPECT_NE(m.find("not supported"), std::string::npos) << m;

  Tensor* logits = c.new_tensor(DType::F32, {8, 5});
  m = error_of([&] { ops::top_k(c, logits, 0); });
  EXPECT_NE(m.find("TOP_K: k 0 must be in [1, 8]"), std::string::npos) << m;
  EXPECT_THROW(ops::top_k(c, logits, 9), OpError);
  EXPECT_THROW(ops::top_k(c, c.new_tensor(DType::F16, {8, 5}), 2), OpError);
  m = error_of([&] { ops::get_rows(c, c.new_tensor(DType::F32, {1, 8, 4}), ids); });
  EXPECT_NE(m.find("one table per column"), std::string::npos) << m;
}

TEST(OpErrors, MoeExpertIdOutOfRange) {
  for (int32_t bad : {4, -1}) {
    LeafData data([&](Tensor& leaf) {
      if (leaf.type != DType::I32) return fill_random(leaf);
      auto* p = static_cast<int32_t*>(leaf.data);
      for (int64_t i = 0; i < leaf.nelements(); ++i) p[i] = static_cast<int32_t>(rand_int(0, 2));
      p[3] = bad;  // slot 1 of token 1
    });
    const std::string m = error_of([&] {
      run_op(cpu(), [&](Context& c) {
        return ops::mul_mat_id(c, c.new_tensor(DType::Q8_0, {64, 8, 4}), c.new_tensor(DType::I32, {2, 3}),
                               c.new_tensor(DType::F32, {64, 1, 3}));
      }, data);
    });
    EXPECT_NE(m.find(fmt::format("MUL_MAT_ID: id {} of slot 1 of token 1 outside [0, 4)", bad)), std::string::npos) << m;
  }
}

TEST(OpErrors, RopeParamsRoundTripThroughOpParams) {
  ops::RopeParams p{40, ops::RopeMode::NORMAL, 5e5f, 0.125f, 0.75f, 1.2f, 24.0f, 1.5f, 8192};
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {64, 2, 3});
  Tensor* t = ops::rope(ctx, x, ctx.new_tensor(DType::I32, {3}), p, ctx.new_tensor(DType::F32, {20}));
  const ops::RopeParams q = ops::rope_params_of(*t);
  EXPECT_EQ(q.n_rot, 40);
  EXPECT_EQ(q.mode, ops::RopeMode::NORMAL);
  EXPECT_EQ(q.freq_base, 5e5f);
  EXPECT_EQ(q.freq_scale, 0.125f);
  EXPECT_EQ(q.ext_factor, 0.75f);
  EXPECT_EQ(q.attn_factor, 1.2f);
  EXPECT_EQ(q.beta_fast, 24.0f);
  EXPECT_EQ(q.beta_slow, 1.5f);
  EXPECT_EQ(q.n_ctx_orig, 8192);
  EXPECT_DOUBLE_EQ(ops::yarn_mscale(4.0), 0.1 * std::log(4.0) + 1.0);
  EXPECT_EQ(ops::yarn_mscale(0.5), 1.0);
}

TEST(OpErrors, RopeBadParametersAreRejected) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {64, 2, 3});
  Tensor* pos = ctx.new_tensor(DType::I32, {3});
  ops::RopeParams yarn;
  yarn.ext_factor = 1.0f;  // YaRN without an original context
  EXPECT_THROW(ops::rope(ctx, x, pos, yarn), OpError);
  ops::RopeParams scale;
  scale.freq_scale = 0.0f;
  EXPECT_THROW(ops::rope(ctx, x, pos, scale), OpError);
  ops::RopeParams plain;
  EXPECT_THROW(ops::rope(ctx, x, pos, plain, ctx.new_tensor(DType::F32, {31})), OpError);  // n_rot/2 = 32
  EXPECT_THROW(ops::rope(ctx, x, pos, plain, ctx.new_tensor(DType::F16, {32})), OpError);
  EXPECT_NO_THROW(ops::rope(ctx, x, pos, plain, ctx.new_tensor(DType::F32, {32})));
}

}  // namespace
}  // namespace minfer::test
