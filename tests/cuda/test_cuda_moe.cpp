// The mixture-of-experts ops on CUDA against the CPU (same random inputs, poisoned arenas): top_k
// with ties, NaN and infinities (exact ids), get_rows from a batch of tables, mul_mat_id for every
// weight dtype at decode and prefill sizes with repeated and unused experts, mul_mat_id against
// CUDA's own mul_mat of each expert slice bit for bit, and a bad expert id as an OpError.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cuda_test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

TEST(CudaMoe, TopKMatchesTheCpuExactly) {
  MINFER_REQUIRE_GPU();
  for (int64_t n : {8, 33, 128, 4097})
    for (int32_t k : {1, 2, 8})
      for (int mode = 0; mode < 3; ++mode) {  // 0: normal values, 1: a 7-value grid (ties), 2: + NaN/inf/-0
        LeafData data([&](Tensor& leaf) {
          auto* p = static_cast<float*>(leaf.data);
          for (int64_t i = 0; i < leaf.nelements(); ++i)
            p[i] = mode == 0 ? randn(1)[0] : static_cast<float>(rand_int(-3, 3));
          if (mode == 2) {
            const float inf = std::numeric_limits<float>::infinity();
            p[1] = std::nanf("");
            p[3] = -inf;
            p[5] = inf;
            p[6] = -0.0f;
            p[7] = 0.0f;
            p[n + 2] = std::nanf("");  // row 1
          }
        });
        for (bool strided : {false, true})
          compare_cpu_cuda(
              [&](Context& c) {
                if (!strided) return ops::top_k(c, c.new_tensor(DType::F32, {n, 5}), k);
                return ops::top_k(c, transpose(c, c.new_tensor(DType::F32, {5, n})), k);
              },
              data, 0, fmt::format("top_k n={} k={} mode={} strided={}", n, k, mode, strided));
      }
}

TEST(CudaMoe, GetRowsFromABatchOfTables) {
  MINFER_REQUIRE_GPU();
  LeafData data([](Tensor& leaf) {
    if (leaf.type != DType::I32) return fill_random(leaf);
    for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, 7));
  });
  compare_cpu_cuda([](Context& c) {
    return ops::get_rows(c, c.new_tensor(DType::F32, {1, 8, 33}), c.new_tensor(DType::I32, {2, 33}));
  }, data, 0, "get_rows 3-D table");
}

// Token 0 selects one expert in every slot (repeats); the last expert is never selected.
LeafData moe_data(int64_t n_expert) {
  return LeafData([n_expert](Tensor& leaf) {
    if (leaf.type != DType::I32) return fill_random(leaf);
    auto* p = static_cast<int32_t*>(leaf.data);
    const int32_t e0 = static_cast<int32_t>(rand_int(0, n_expert - 2));
    for (int64_t i = 0; i < leaf.nelements(); ++i) p[i] = i < leaf.ne[0] ? e0 : static_cast<int32_t>(rand_int(0, n_expert - 2));
  });
}

struct MoeShape {
  int64_t M, n_expert, k, n_act, n_tokens;
};

// Output [M, k + n_expert * n_act, T]: per token the op's k slots, then mul_mat of every expert's
// slice over the token's activation rows.
Tensor* build_with_slices(Context& c, DType wt, DType at, int64_t K, const MoeShape& s) {
  Tensor* as = c.new_tensor(wt, {K, s.M, s.n_expert});
  Tensor* ids = c.new_tensor(DType::I32, {s.k, s.n_tokens});
  Tensor* b = c.new_tensor(at, {K, s.n_act, s.n_tokens});
  Tensor* out = ops::mul_mat_id(c, as, ids, b);
  for (int64_t e = 0; e < s.n_expert; ++e)
    out = ops::concat(c, out, ops::mul_mat(c, view(c, as, {K, s.M}, {as->nb[1]}, static_cast<size_t>(e) * as->nb[2]), b), 1);
  return out;
}

class CudaMulMatId : public ::testing::TestWithParam<DType> {};

TEST_P(CudaMulMatId, MatchesCpuAndItsOwnMulMatPerExpert) {
  MINFER_REQUIRE_GPU();
  const DType wt = GetParam();
  const int64_t K = dtype_block_size(wt) == 256 ? 512 : 96;
  const bool block = dtype_is_quantized(wt);
  for (DType at : {DType::F32, DType::F16})
    for (const MoeShape& s : {MoeShape{33, 5, 2, 1, 1}, MoeShape{33, 5, 2, 1, 7}, MoeShape{64, 9, 8, 8, 3},
                              MoeShape{37, 16, 8, 1, 70}, MoeShape{16, 4, 3, 3, 300}}) {
      const std::string what = fmt::format("mul_mat_id {} x {} M={} experts={} k={} n_act={} tokens={}", dtype_name(wt),
                                           dtype_name(at), s.M, s.n_expert, s.k, s.n_act, s.n_tokens);
      LeafData data = moe_data(s.n_expert);
      // Both graphs have the leaves as, ids, b in this order (LeafData checks their sizes).
      auto ref = run_op(cpu(), [&](Context& c) {
        return ops::mul_mat_id(c, c.new_tensor(wt, {K, s.M, s.n_expert}), c.new_tensor(DType::I32, {s.k, s.n_tokens}),
                               c.new_tensor(at, {K, s.n_act, s.n_tokens}));
      }, data);
      auto got = run_op(*gpu(), [&](Context& c) { return build_with_slices(c, wt, at, K, s); }, data);
      const int64_t W = s.k + s.n_expert * s.n_act;
      std::vector<float> op_vals, per_expert;
      std::vector<int32_t> id(static_cast<size_t>(s.k * s.n_tokens));  // the ids both runs were given
      const auto& leafs = got.graph.leafs();
      for (size_t i = 0; i < leafs.size(); ++i)
        if (leafs[i]->type == DType::I32) std::memcpy(id.data(), data.bytes(i, *leafs[i]).data(), id.size() * 4);
      for (int64_t t = 0; t < s.n_tokens; ++t)
        for (int64_t j = 0; j < s.k; ++j)
          for (int64_t m = 0; m < s.M; ++m) {
            op_vals.push_back(got.values[static_cast<size_t>((t * W + j) * s.M + m)]);
            const int64_t e = id[static_cast<size_t>(j + s.k * t)];
            per_expert.push_back(got.values[static_cast<size_t>((t * W + s.k + e * s.n_act + j % s.n_act) * s.M + m)]);
          }
      expect_close(op_vals, ref.values, cuda_tolerance(wt), "cuda vs cpu: " + what);
      // MMVQ up to 8 rows per batch (the slices' mul_mat here): the same bits. Float weights run
      // another matvec than mul_mat's, within f32 rounding of it.
      if (block) {
        size_t diff = 0;
        for (size_t i = 0; i < op_vals.size(); ++i) diff += std::memcmp(&op_vals[i], &per_expert[i], 4) != 0;
        EXPECT_EQ(diff, 0u) << what << ": differs from CUDA mul_mat of the expert slices (seed " << seed() << ")";
      } else {
        expect_close(op_vals, per_expert, 1e-10, what + " vs CUDA mul_mat per expert");
      }
    }
}

INSTANTIATE_TEST_SUITE_P(EveryWeightDtype, CudaMulMatId,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaMoe, BadExpertIdIsAnOpError) {
  MINFER_REQUIRE_GPU();
  for (DType wt : {DType::Q4_K, DType::F16}) {
    LeafData data([](Tensor& leaf) {
      if (leaf.type != DType::I32) return fill_random(leaf);
      auto* p = static_cast<int32_t*>(leaf.data);
      for (int64_t i = 0; i < leaf.nelements(); ++i) p[i] = static_cast<int32_t>(i % 4);
      p[3] = 4;
    });
    try {
      run_op(*gpu(), [&](Context& c) {
        return ops::mul_mat_id(c, c.new_tensor(wt, {256, 8, 4}), c.new_tensor(DType::I32, {2, 3}),
                               c.new_tensor(DType::F32, {256, 1, 3}));
      }, data);
      FAIL() << "no error";
    } catch (const OpError& e) {
      EXPECT_NE(std::string(e.what()).find("MUL_MAT_ID: expert id 4 outside [0, 4)"), std::string::npos) << e.what();
    }
  }
  LeafData ok = moe_data(4);  // the backend is usable afterwards
  compare_cpu_cuda([](Context& c) {
    return ops::mul_mat_id(c, c.new_tensor(DType::Q8_0, {64, 8, 4}), c.new_tensor(DType::I32, {2, 3}),
                           c.new_tensor(DType::F32, {64, 1, 3}));
  }, ok, cuda_tolerance(DType::Q8_0), "mul_mat_id after an error");
}

}  // namespace
}  // namespace minfer::test
