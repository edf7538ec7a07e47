// get_rows, add, mul, scale, silu, swiglu, concat, cpy/cast, argmax against double loops.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_harness.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/ops.h"
#include "ref.h"
#include "tensor/fp16.h"

namespace minfer::test {
namespace {

CpuBackend& cpu() {
  static CpuBackend b(2);
  return b;
}

const int64_t kSizes[] = {1, 7, 33, 4097};

// a [n0, n1, n2, n3] and a broadcastable b, f32 or f16, optionally a strided view of a bigger tensor.
struct BinaryCase {
  std::array<int64_t, 4> ne;
  std::array<int64_t, 4> ne_b;
  DType ta, tb;
  bool strided_a;
};

void run_binary(Op op, const BinaryCase& c) {
  Tensor *a = nullptr, *b = nullptr, *abase = nullptr;
  auto build = [&](Context& ctx) {
    if (c.strided_a) {
      // a is every other row of a base tensor with twice the rows.
      abase = ctx.new_tensor(c.ta, {c.ne[0], 2 * c.ne[1], c.ne[2], c.ne[3]});
      a = view(ctx, abase, {c.ne[0], c.ne[1], c.ne[2], c.ne[3]},
               {2 * abase->nb[1], abase->nb[2], abase->nb[3]}, 0);
    } else {
      a = ctx.new_tensor(c.ta, c.ne);
    }
    b = ctx.new_tensor(c.tb, c.ne_b);
    return op == Op::ADD ? ops::add(ctx, a, b) : op == Op::MUL ? ops::mul(ctx, a, b) : ops::swiglu(ctx, a, b);
  };
  LeafData data;
  auto r = run_op(cpu(), build, data);
  Nd A(*a), B(*b);
  Nd R(c.ne);
  for (int64_t i3 = 0; i3 < c.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < c.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < c.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < c.ne[0]; ++i0) {
          const double x = A.at(i0, i1, i2, i3);
          const double y = B.at(i0 % c.ne_b[0], i1 % c.ne_b[1], i2 % c.ne_b[2], i3 % c.ne_b[3]);
          R.at(i0, i1, i2, i3) = op == Op::ADD ? x + y : op == Op::MUL ? x * y : x / (1 + std::exp(-x)) * y;
        }
  expect_close(r.values, R.v, 1e-10, std::string(op_name(op)) + " " + describe(*a) + " x " + describe(*b));
}

class OpBinary : public ::testing::TestWithParam<std::tuple<Op, DType, DType>> {};

TEST_P(OpBinary, AllSizesBroadcastAndViews) {
  const auto [op, ta, tb] = GetParam();
  for (int64_t n : kSizes)
          for (bool strided : {false, true}) {
            const int64_t n1 = n > 64 ? 3 : 5;
            BinaryCase c{{n, n1, 2, 1}, {n, n1, 2, 1}, ta, tb, strided};
            if (op != Op::SWIGLU) c.ne_b = {n, 1, rand_int(0, 1) ? 2 : 1, 1};  // broadcast rows
            SCOPED_TRACE(std::string(op_name(op)) + " n=" + std::to_string(n));
            run_binary(op, c);
          }
}

INSTANTIATE_TEST_SUITE_P(AddMulSwiglu, OpBinary,
                         ::testing::Combine(::testing::Values(Op::ADD, Op::MUL, Op::SWIGLU),
                                            ::testing::Values(DType::F32, DType::F16),
                                            ::testing::Values(DType::F32, DType::F16)),
                         [](const auto& info) {
                           return std::string(op_name(std::get<0>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<2>(info.param)));
                         });

TEST(OpElementwise, ScaleAndSilu) {
  for (int64_t n : kSizes)
    for (DType t : {DType::F32, DType::F16}) {
      Tensor* a = nullptr;
      const float s = static_cast<float>(randu(1, -3, 3)[0]);
      LeafData data;
      auto rs = run_op(cpu(), [&](Context& c) { a = c.new_tensor(t, {n, 3}); return ops::scale(c, a, s); }, data);
      Nd A(*a);
      std::vector<double> es, ea;
      for (double x : A.v) es.push_back(s * x);
      expect_close(rs.values, es, 1e-12, "scale");
      LeafData data2;
      auto ra = run_op(cpu(), [&](Context& c) { a = c.new_tensor(t, {n, 3}); return ops::silu(c, a); }, data2);
      Nd A2(*a);
      for (double x : A2.v) ea.push_back(x / (1 + std::exp(-x)));
      expect_close(ra.values, ea, 1e-12, "silu");
    }
}

TEST(OpElementwise, ConcatEveryDim) {
  for (int dim = 0; dim < 4; ++dim)
    for (DType t : {DType::F32, DType::F16}) {
      Tensor *a = nullptr, *b = nullptr;
      std::array<int64_t, 4> na{5, 3, 2, 2}, nb = na;
      nb[dim] = 4;
      LeafData data;
      auto r = run_op(cpu(), [&](Context& c) {
        a = c.new_tensor(t, na);
        b = c.new_tensor(t, nb);
        return ops::concat(c, a, b, dim);
      }, data);
      Nd A(*a), B(*b);
      auto ne = na;
      ne[dim] += nb[dim];
      Nd R(ne);
      for (int64_t i3 = 0; i3 < ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < ne[2]; ++i2)
          for (int64_t i1 = 0; i1 < ne[1]; ++i1)
            for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
              int64_t j[4] = {i0, i1, i2, i3};
              if (j[dim] < na[dim]) {
                R.at(i0, i1, i2, i3) = A.at(j[0], j[1], j[2], j[3]);
              } else {
                j[dim] -= na[dim];
                R.at(i0, i1, i2, i3) = B.at(j[0], j[1], j[2], j[3]);
              }
            }
      expect_close(r.values, R.v, 0, "concat dim " + std::to_string(dim));
    }
}

class OpGetRowsDtype : public ::testing::TestWithParam<DType> {};

TEST_P(OpGetRowsDtype, RowsDecodeExactly) {
  {
    const DType t = GetParam();
    const int64_t n_embd = dtype_block_size(t) == 256 ? 512 : 64, n_rows = 11;
    Tensor *table = nullptr, *ids = nullptr;
    LeafData data([&](Tensor& leaf) {
      if (leaf.type == DType::I32) {
        for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, n_rows - 1));
      } else {
        fill_random(leaf);
      }
    });
    auto r = run_op(cpu(), [&](Context& c) {
      table = c.new_tensor(t, {n_embd, n_rows});
      ids = c.new_tensor(DType::I32, {7});
      return ops::get_rows(c, table, ids);
    }, data);
    Nd T(*table);
    std::vector<double> e;
    for (int32_t id : ints(*ids))
      for (int64_t i = 0; i < n_embd; ++i) e.push_back(T.at(i, id));
    expect_close(r.values, e, 0, "get_rows " + std::string(dtype_name(t)));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, OpGetRowsDtype,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(OpElementwise, GetRowsRejectsOutOfRangeId) {
  Tensor* table = nullptr;
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = 11;
    else fill_random(leaf);
  });
  try {
    run_op(cpu(), [&](Context& c) {
      table = c.new_tensor(DType::F32, {8, 11});
      return ops::get_rows(c, table, c.new_tensor(DType::I32, {1}));
    }, data);
    FAIL() << "no error";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("id 11"), std::string::npos) << e.what();
  }
}

class OpCast : public ::testing::TestWithParam<DType> {};

TEST_P(OpCast, FromEveryFloatType) {
  const DType to = GetParam();
  for (DType from : {DType::F32, DType::F16, DType::BF16}) {
      const int64_t n0 = dtype_block_size(to) == 256 ? 256 : 64;
      Tensor* a = nullptr;
      LeafData data;
      auto r = run_op(cpu(), [&](Context& c) {
        a = c.new_tensor(from, {n0, 3});
        return ops::cast(c, a, to);
      }, data);
      Nd A(*a);
      // Exact for widening/equal types, otherwise within the destination's quantization error.
      const double tol = (to == from || to == DType::F32 || (to == DType::F16 && from != DType::F32)) ? 0
                         : to == DType::F16 ? 1e-6 : to == DType::BF16 ? 2e-5 : to == DType::Q8_0 ? 1e-4
                         : to == DType::Q6_K ? 2e-3 : 1e-2;
      expect_close(r.values, A.v, tol, "cast " + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
    }
}

INSTANTIATE_TEST_SUITE_P(ToDtype, OpCast,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(OpElementwise, StridedCopy) {
  // A transposed (strided) source copied into a contiguous f16 tensor.
  Tensor* a = nullptr;
  LeafData data;
  auto r = run_op(cpu(), [&](Context& c) {
    a = c.new_tensor(DType::F32, {5, 7});
    return ops::cast(c, transpose(c, a), DType::F32);
  }, data);
  Nd A(*a);
  std::vector<double> e;
  for (int64_t i1 = 0; i1 < 5; ++i1)
    for (int64_t i0 = 0; i0 < 7; ++i0) e.push_back(A.at(i1, i0));
  expect_close(r.values, e, 0, "transposed copy");
}

TEST(OpElementwise, ArgmaxTiesLowestIndex) {
  for (int64_t n : kSizes) {
    Tensor* a = nullptr;
    LeafData data([&](Tensor& leaf) {
      fill_random(leaf);
      auto* p = static_cast<float*>(leaf.data);
      if (n > 3) p[n + 3] = p[n + 1] = 100.0f;  // a tie in row 1
    });
    auto r = run_op(cpu(), [&](Context& c) {
      a = c.new_tensor(DType::F32, {n, 4});
      return ops::argmax(c, a);
    }, data);
    Nd A(*a);
    std::vector<double> e;
    for (int64_t row = 0; row < 4; ++row) {
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i)
        if (A.at(i, row) > A.at(best, row)) best = i;
      e.push_back(static_cast<double>(best));
    }
    expect_close(r.values, e, 0, "argmax n=" + std::to_string(n));
  }
}

}  // namespace
}  // namespace minfer::test
