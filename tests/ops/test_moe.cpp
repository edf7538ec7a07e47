// Mixture-of-experts ops: top_k, batched get_rows, mul_mat_id against double loops, mul_mat_id
// against mul_mat per expert bit for bit, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

// The reference order, written as selection: rank r takes the best index not yet taken, scanning
// indices upwards and replacing only on a strictly better value (so ties keep the lower index).
std::vector<int32_t> ref_top_k(const std::vector<double>& v, int64_t k) {
  std::vector<bool> taken(v.size(), false);
  std::vector<int32_t> out;
  for (int64_t r = 0; r < k; ++r) {
    int64_t best = -1;
    for (size_t i = 0; i < v.size(); ++i) {
      if (taken[i]) continue;
      if (best < 0) { best = static_cast<int64_t>(i); continue; }
      const double a = v[i], c = v[static_cast<size_t>(best)];
      const bool better = std::isnan(c) ? false : std::isnan(a) ? true : a > c;
      if (better) best = static_cast<int64_t>(i);
    }
    taken[static_cast<size_t>(best)] = true;
    out.push_back(static_cast<int32_t>(best));
  }
  return out;
}

void check_top_k(int64_t n, int64_t rows, int32_t k, bool ties, bool specials, bool strided) {
  Tensor* x = nullptr;
  LeafData data([&](Tensor& leaf) {
    auto* p = static_cast<float*>(leaf.data);
    for (int64_t i = 0; i < leaf.nelements(); ++i)
      p[i] = ties ? static_cast<float>(rand_int(-3, 3)) : randn(1)[0];  // a 7-value grid: many ties
    if (specials && leaf.nelements() >= 8) {
      const float inf = std::numeric_limits<float>::infinity();
      p[1] = std::nanf("");
      p[3] = -inf;
      p[5] = inf;
      p[6] = -0.0f;
      p[7] = 0.0f;
    }
  });
  auto r = run_op(cpu(), [&](Context& c) {
    if (!strided) {
      x = c.new_tensor(DType::F32, {n, rows});
      return ops::top_k(c, x, k);
    }
    x = c.new_tensor(DType::F32, {rows, n});
    return ops::top_k(c, transpose(c, x), k);  // [n, rows] with strided rows
  }, data);
  Nd X(*x);
  std::vector<double> e;
  for (int64_t i1 = 0; i1 < rows; ++i1) {
    std::vector<double> v;
    for (int64_t i0 = 0; i0 < n; ++i0) v.push_back(strided ? X.at(i1, i0) : X.at(i0, i1));
    for (int32_t id : ref_top_k(v, k)) e.push_back(id);
  }
  expect_close(r.values, e, 0, fmt::format("top_k n={} rows={} k={} ties={} specials={} strided={}", n, rows, k, ties,
                                           specials, strided));
}

TEST(OpMoe, TopKOrderTiesAndSpecials) {
  for (int64_t n : {8, 33, 128})
    for (int32_t k : {1, 2, 8}) {
      check_top_k(n, 7, k, false, false, false);
      check_top_k(n, 7, k, true, false, false);
      check_top_k(n, 5, k, true, true, false);
      check_top_k(n, 5, k, true, false, true);
    }
  check_top_k(8, 3, 8, true, true, false);  // k = n: a full sort
  check_top_k(1, 4, 1, false, false, false);
}

TEST(OpMoe, GetRowsFromABatchOfTables) {
  const int64_t n_embd = 3, n_rows = 8, n = 2, b = 5;
  Tensor *table = nullptr, *ids = nullptr;
  LeafData data([&](Tensor& leaf) {
    if (leaf.type != DType::I32) return fill_random(leaf);
    for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, n_rows - 1));
  });
  auto r = run_op(cpu(), [&](Context& c) {
    table = c.new_tensor(DType::F32, {n_embd, n_rows, b});
    ids = c.new_tensor(DType::I32, {n, b});
    return ops::get_rows(c, table, ids);
  }, data);
  Nd T(*table);
  const auto id = ints(*ids);
  std::vector<double> e;
  for (int64_t j = 0; j < b; ++j)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < n_embd; ++c) e.push_back(T.at(c, id[static_cast<size_t>(i + n * j)], j));
  expect_close(r.values, e, 0, "get_rows 3-D table");
}

// Expert ids with the cases that matter: token 0 selects one expert in every slot (repeats), the
// last expert is never selected (an expert no token uses), the rest are random.
void fill_ids(Tensor& leaf, int64_t n_expert) {
  auto* p = static_cast<int32_t*>(leaf.data);
  const int64_t k = leaf.ne[0];
  const int32_t e0 = static_cast<int32_t>(rand_int(0, n_expert - 2));
  for (int64_t i = 0; i < leaf.nelements(); ++i)
    p[i] = i < k ? e0 : static_cast<int32_t>(rand_int(0, n_expert - 2));
}

struct MoeCase {
  int64_t K, M, n_expert, k, n_act, n_tokens;
};

// mul_mat_id against (1) a double loop over dequantized weights and activations rounded through the
// weight's vec_dot_type (as test_matmul.cpp does), (2) mul_mat of each expert's 2-D slice over all
// activation rows, bit for bit (float weights with f32 activations take mul_mat's Eigen GEMM, whose
// summation order differs: compared within f32 rounding instead).
void check_mul_mat_id(DType wt, DType at, const MoeCase& mc) {
  const auto [K, M, E, k, n_act, T] = mc;
  Tensor *as = nullptr, *ids = nullptr, *b = nullptr;
  LeafData data([&](Tensor& leaf) { leaf.type == DType::I32 ? fill_ids(leaf, E) : fill_random(leaf); });
  auto r = run_op(cpu(), [&](Context& c) {
    as = c.new_tensor(wt, {K, M, E});
    ids = c.new_tensor(DType::I32, {k, T});
    b = c.new_tensor(at, {K, n_act, T});
    // [M, k + E * n_act, T]: per token the k slots, then mul_mat of every expert's slice.
    Tensor* out = ops::mul_mat_id(c, as, ids, b);
    for (int64_t e = 0; e < E; ++e) {
      Tensor* slice = view(c, as, {K, M}, {as->nb[1]}, static_cast<size_t>(e) * as->nb[2]);
      out = ops::concat(c, out, ops::mul_mat(c, slice, b), 1);
    }
    return out;
  }, data);
  const std::string what = fmt::format("mul_mat_id {} x {} K={} M={} experts={} k={} n_act={} tokens={}", dtype_name(wt),
                                       dtype_name(at), K, M, E, k, n_act, T);
  const int64_t W = k + E * n_act;  // output rows per token
  ASSERT_EQ(r.values.size(), static_cast<size_t>(M * W * T)) << what;
  auto at_row = [&](int64_t row, int64_t t, int64_t m) { return r.values[static_cast<size_t>((t * W + row) * M + m)]; };
  std::vector<float> got;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t m = 0; m < M; ++m) got.push_back(at_row(j, t, m));
  const size_t n_out = got.size();

  Nd A(*as), B(*b);
  const DType vt = vec_dot_type(wt);
  if (vt != DType::F32) {  // the activations as the op sees them
    std::vector<float> row(static_cast<size_t>(K)), back(static_cast<size_t>(K));
    std::vector<uint8_t> q(dtype_row_size(vt, K));
    for (size_t rr = 0; rr < B.v.size() / static_cast<size_t>(K); ++rr) {
      for (int64_t i = 0; i < K; ++i) row[static_cast<size_t>(i)] = static_cast<float>(B.v[rr * static_cast<size_t>(K) + static_cast<size_t>(i)]);
      quantize_row_activations(vt, row.data(), q.data(), K);
      dequantize_row(vt, q.data(), back.data(), K);
      for (int64_t i = 0; i < K; ++i) B.v[rr * static_cast<size_t>(K) + static_cast<size_t>(i)] = back[static_cast<size_t>(i)];
    }
  }
  const auto id = ints(*ids);
  std::vector<double> e;
  std::vector<float> per_expert;  // what mul_mat gave for the same (expert, activation row)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t ex = id[static_cast<size_t>(j + k * t)];
      for (int64_t m = 0; m < M; ++m) {
        double s = 0;
        for (int64_t i = 0; i < K; ++i) s += A.at(i, m, ex) * B.at(i, j % n_act, t);
        e.push_back(s);
        per_expert.push_back(at_row(k + ex * n_act + j % n_act, t, m));
      }
    }
  expect_close(got, e, 1e-10, what);
  if (wt == DType::F32 && at == DType::F32) {
    expect_close(got, per_expert, 1e-12, what + " vs mul_mat per expert");
  } else {
    size_t diff = 0;
    for (size_t i = 0; i < n_out; ++i) diff += std::memcmp(&got[i], &per_expert[i], 4) != 0;
    EXPECT_EQ(diff, 0u) << what << ": values differ from mul_mat of the expert's slice (seed " << seed() << ")";
  }
}

class OpMulMatIdDtype : public ::testing::TestWithParam<DType> {};

TEST_P(OpMulMatIdDtype, EqualsMulMatPerExpert) {
  const DType wt = GetParam();
  const int64_t K = dtype_block_size(wt) == 256 ? 512 : 96;
  for (DType at : {DType::F32, DType::F16}) {
    check_mul_mat_id(wt, at, {K, 33, 5, 2, 1, 7});   // prefill: one activation row per token
    check_mul_mat_id(wt, at, {K, 33, 5, 3, 3, 7});   // one row per slot (the down projection)
    check_mul_mat_id(wt, at, {K, 7, 4, 2, 1, 1});    // decode
    check_mul_mat_id(wt, at, {K, 16, 9, 8, 8, 2});   // k = 8 of 9 experts
  }
}

INSTANTIATE_TEST_SUITE_P(EveryWeightDtype, OpMulMatIdDtype,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(OpMoe, BadShapesAndDtypesNameTheOp) {
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

TEST(OpMoe, ExpertIdOutOfRangeIsAnError) {
  for (int32_t bad : {4, -1}) {
    LeafData data([&](Tensor& leaf) {
      if (leaf.type != DType::I32) return fill_random(leaf);
      fill_ids(leaf, 4);
      static_cast<int32_t*>(leaf.data)[3] = bad;  // slot 1 of token 1
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

}  // namespace
}  // namespace minfer::test
