// Every basic op on CUDA against the CPU reference (same random inputs, poisoned arenas):
// element-wise ops with broadcast and strided views, get_rows from every dtype, cpy/cast to and
// from every supported dtype, argmax, rms_norm, soft_max, rope. Sizes include 1, 7, 33, 4097.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda_test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

const int64_t kSizes[] = {1, 7, 33, 4097};

LeafData ids_below(int64_t hi) {
  return LeafData([hi](Tensor& leaf) {
    if (leaf.type == DType::I32)
      for (int64_t i = 0; i < leaf.nelements(); ++i)
        static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, hi - 1));
    else
      fill_random(leaf);
  });
}

class CudaBinary : public ::testing::TestWithParam<std::tuple<Op, DType, DType>> {};

TEST_P(CudaBinary, SizesBroadcastAndViews) {
  MINFER_REQUIRE_GPU();
  const auto [op, ta, tb] = GetParam();
  for (int64_t n : kSizes)
    for (bool strided : {false, true})
      for (int bc = 0; bc < 3; ++bc) {
        if (op == Op::SWIGLU && bc > 0) continue;
        const int64_t n1 = n > 64 ? 3 : 5;
        std::array<int64_t, 4> ne{n, n1, 2, 1}, ne_b = ne;
        if (bc == 1) ne_b = {n, 1, 2, 1};
        if (bc == 2) ne_b = {1, n1, 1, 1};
        auto build = [&](Context& c) {
          Tensor* a;
          if (strided) {
            Tensor* base = c.new_tensor(ta, {n, 2 * n1, 2, 1});
            a = view(c, base, {n, n1, 2, 1}, {2 * base->nb[1], base->nb[2], base->nb[3]}, base->nb[1]);
          } else {
            a = c.new_tensor(ta, ne);
          }
          Tensor* b = c.new_tensor(tb, ne_b);
          return op == Op::ADD ? ops::add(c, a, b) : op == Op::MUL ? ops::mul(c, a, b) : ops::swiglu(c, a, b);
        };
        LeafData data;
        compare_cpu_cuda(build, data, 1e-10,
                         fmt::format("{} n={} strided={} bcast={}", op_name(op), n, strided, bc));
      }
}

INSTANTIATE_TEST_SUITE_P(AddMulSwiglu, CudaBinary,
                         ::testing::Combine(::testing::Values(Op::ADD, Op::MUL, Op::SWIGLU),
                                            ::testing::Values(DType::F32, DType::F16),
                                            ::testing::Values(DType::F32, DType::F16)),
                         [](const auto& info) {
                           return std::string(op_name(std::get<0>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<2>(info.param)));
                         });

TEST(CudaOps, SwigluHalvesOfOneMatrix) {
  MINFER_REQUIRE_GPU();
  // gate and up as the two halves of one [2 * n_ff, N] matrix (the fused gate|up matmul output).
  for (int64_t n_ff : {7, 96, 4097}) {
    auto build = [&](Context& c) {
      Tensor* gu = c.new_tensor(DType::F32, {2 * n_ff, 9});
      Tensor* g = view(c, gu, {n_ff, 9}, {gu->nb[1]}, 0);
      Tensor* u = view(c, gu, {n_ff, 9}, {gu->nb[1]}, static_cast<size_t>(n_ff) * 4);
      return ops::swiglu(c, g, u);
    };
    LeafData data;
    compare_cpu_cuda(build, data, 1e-10, "swiglu halves n_ff=" + std::to_string(n_ff));
  }
}

TEST(CudaOps, ScaleSiluConcat) {
  MINFER_REQUIRE_GPU();
  for (int64_t n : kSizes)
    for (DType t : {DType::F32, DType::F16}) {
      const float s = static_cast<float>(randu(1, -3, 3)[0]);
      LeafData d1, d2;
      compare_cpu_cuda([&](Context& c) { return ops::scale(c, transpose(c, c.new_tensor(t, {3, n})), s); }, d1, 1e-12,
                       "scale (transposed) n=" + std::to_string(n));
      compare_cpu_cuda([&](Context& c) { return ops::silu(c, c.new_tensor(t, {n, 3})); }, d2, 1e-10,
                       "silu n=" + std::to_string(n));
    }
  for (int dim = 0; dim < 4; ++dim)
    for (DType t : {DType::F32, DType::F16}) {
      std::array<int64_t, 4> na{5, 3, 2, 2}, nb = na;
      nb[dim] = 4;
      LeafData data;
      compare_cpu_cuda([&](Context& c) { return ops::concat(c, c.new_tensor(t, na), c.new_tensor(t, nb), dim); }, data,
                       0, "concat dim " + std::to_string(dim));
    }
}

class CudaGetRows : public ::testing::TestWithParam<DType> {};

TEST_P(CudaGetRows, EveryDtypeAnd2dIds) {
  MINFER_REQUIRE_GPU();
  const DType t = GetParam();
  const int64_t n_embd = dtype_block_size(t) == 256 ? 512 : 64, n_rows = 37;
  for (bool two_d : {false, true}) {
    LeafData data = ids_below(n_rows);
    compare_cpu_cuda(
        [&](Context& c) {
          Tensor* table = c.new_tensor(t, {n_embd, n_rows});
          Tensor* ids = two_d ? c.new_tensor(DType::I32, {7, 3}) : c.new_tensor(DType::I32, {33});
          return ops::get_rows(c, table, ids);
        },
        data, 0, "get_rows " + std::string(dtype_name(t)));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, CudaGetRows,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaOps, GetRowsOutOfRangeIdIsAnOpError) {
  MINFER_REQUIRE_GPU();
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = 11;
    else fill_random(leaf);
  });
  try {
    run_op(*gpu(), [&](Context& c) {
      return ops::get_rows(c, c.new_tensor(DType::F32, {8, 11}), c.new_tensor(DType::I32, {1}));
    }, data);
    FAIL() << "no error";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("id 11"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GET_ROWS"), std::string::npos) << e.what();
  }
  // The backend is usable afterwards.
  LeafData ok = ids_below(11);
  compare_cpu_cuda([&](Context& c) {
    return ops::get_rows(c, c.new_tensor(DType::F32, {8, 11}), c.new_tensor(DType::I32, {3}));
  }, ok, 0, "get_rows after an error");
}

class CudaCast : public ::testing::TestWithParam<DType> {};

TEST_P(CudaCast, FromEveryDecodableType) {
  MINFER_REQUIRE_GPU();
  const DType to = GetParam();
  for (DType from : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t n0 = 256;
    LeafData data;
    compare_cpu_cuda([&](Context& c) { return ops::cast(c, c.new_tensor(from, {n0, 5, 2}), to); }, data, 0,
                     "cast " + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
  }
}

INSTANTIATE_TEST_SUITE_P(ToDtype, CudaCast, ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaOps, CpyStridedReshapingSameTypeAndInto) {
  MINFER_REQUIRE_GPU();
  for (int64_t n : kSizes) {
    LeafData d1;
    compare_cpu_cuda([&](Context& c) { return ops::cast(c, transpose(c, c.new_tensor(DType::F32, {5, n})), DType::F16); },
                     d1, 0, "transposed f32 -> f16 n=" + std::to_string(n));
  }
  LeafData d2;  // a reshaping copy: [12, 5] f16 into [6, 10] f32
  compare_cpu_cuda([&](Context& c) {
    return ops::cpy(c, c.new_tensor(DType::F16, {12, 5}), c.new_tensor(DType::F32, {6, 10}));
  }, d2, 0, "reshaping copy");
  LeafData d3;  // same-type block rows copied raw into a slice of a bigger tensor
  compare_cpu_cuda([&](Context& c) {
    Tensor* dst = c.new_tensor(DType::Q4_K, {256, 9});
    return ops::cpy(c, c.new_tensor(DType::Q4_K, {256, 4}), slice(c, dst, 1, 3, 4));
  }, d3, 0, "q4_K rows into a slice");
  LeafData d4;  // a strided (every other row) f32 source into q8_0
  compare_cpu_cuda([&](Context& c) {
    Tensor* base = c.new_tensor(DType::F32, {64, 10});
    Tensor* a = view(c, base, {64, 5}, {2 * base->nb[1]}, 0);
    return ops::cast(c, a, DType::Q8_0);
  }, d4, 0, "strided f32 -> q8_0");
}

TEST(CudaOps, ArgmaxTiesAndNan) {
  MINFER_REQUIRE_GPU();
  for (int64_t n : kSizes) {
    LeafData data([&](Tensor& leaf) {
      fill_random(leaf);
      auto* p = static_cast<float*>(leaf.data);
      if (n > 3) p[n + 3] = p[n + 1] = 100.0f;    // a tie in row 1
      if (n > 5) p[2 * n + 5] = NAN, p[2 * n + 2] = NAN;  // NaNs in row 2: the first NaN wins
    });
    compare_cpu_cuda([&](Context& c) { return ops::argmax(c, c.new_tensor(DType::F32, {n, 4})); }, data, 0,
                     "argmax n=" + std::to_string(n));
  }
}

TEST(CudaOps, RmsNormSizesDtypesWeightAndViews) {
  MINFER_REQUIRE_GPU();
  for (int64_t n : kSizes)
    for (DType t : {DType::F32, DType::F16})
      for (bool with_w : {false, true}) {
        LeafData data;
        compare_cpu_cuda(
            [&](Context& c) {
              Tensor* base = c.new_tensor(t, {n + 3, 5, 2});
              Tensor* x = slice(c, base, 0, 0, n);
              Tensor* w = with_w ? c.new_tensor(t, {n}) : nullptr;
              return ops::rms_norm(c, x, 1e-6f, w);
            },
            data, 1e-10, fmt::format("rms_norm n={} {} w={}", n, dtype_name(t), with_w));
      }
}

TEST(CudaOps, SoftMaxScaleAndCausalMask) {
  MINFER_REQUIRE_GPU();
  for (int64_t n : kSizes)
    for (bool causal : {false, true}) {
      LeafData data = ids_below(n);
      compare_cpu_cuda(
          [&](Context& c) {
            Tensor* x = c.new_tensor(DType::F32, {n, 5, 2});
            return ops::soft_max(c, x, 0.37f, causal ? c.new_tensor(DType::I32, {5}) : nullptr);
          },
          data, 1e-10, fmt::format("soft_max n={} causal={}", n, causal));
    }
}

TEST(CudaOps, RopeModesPartialRotationViewsAndLongPositions) {
  MINFER_REQUIRE_GPU();
  for (auto mode : {ops::RopeMode::NEOX, ops::RopeMode::NORMAL})
    for (int64_t hd : {4, 64, 128})
      for (bool partial : {false, true}) {
        LeafData data = ids_below(40000);
        ops::RopeParams p;
        p.mode = mode;
        p.n_rot = partial ? static_cast<int32_t>(hd / 2) : 0;
        p.freq_base = 1e6f;
        compare_cpu_cuda(
            [&](Context& c) {
              Tensor* base = c.new_tensor(DType::F32, {hd * 5, 33});
              Tensor* x = view(c, base, {hd, 3, 33}, {static_cast<size_t>(hd) * 4, base->nb[1]}, static_cast<size_t>(hd) * 4);
              return ops::rope(c, x, c.new_tensor(DType::I32, {33}), p);
            },
            data, 1e-11, fmt::format("rope hd={} mode={} partial={}", hd, static_cast<int>(mode), partial));
      }
}

TEST(CudaOps, RopeScalingLinearYarnAndFrequencyFactorsAtLongPositions) {
  // The scaled RoPE (ops/rope.h): linear, YaRN (default and custom betas, a partial ext_factor, a
  // magnitude), Llama 3 frequency factors, and YaRN with factors, positions up to 32767.
  MINFER_REQUIRE_GPU();
  struct Scaling {
    const char* name;
    float freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int32_t n_ctx_orig;
    bool factors;
  };
  const Scaling cases[] = {
      {"linear", 0.25f, 0.0f, 1.0f, 32.0f, 1.0f, 0, false},
      {"yarn", 0.25f, 1.0f, 1.1386294f, 32.0f, 1.0f, 512, false},
      {"yarn-betas", 1.0f / 40.0f, 1.0f, 1.3688879f, 24.0f, 2.0f, 4096, false},
      {"yarn-mix", 0.125f, 0.5f, 0.9f, 32.0f, 1.0f, 8192, false},
      {"llama3", 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 0, true},
      {"yarn+factors", 0.5f, 1.0f, 1.0693147f, 32.0f, 1.0f, 2048, true},
  };
  for (const Scaling& sc : cases)
    for (auto mode : {ops::RopeMode::NEOX, ops::RopeMode::NORMAL})
      for (int64_t hd : {64, 128})
        for (bool partial : {false, true}) {
          const int32_t n_rot = partial ? static_cast<int32_t>(hd / 2) : static_cast<int32_t>(hd);
          LeafData data([&](Tensor& leaf) {
            if (leaf.type == DType::I32) {
              for (int64_t i = 0; i < leaf.nelements(); ++i)
                static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, 32767));
            } else if (leaf.name == "freq_factors") {
              for (int64_t i = 0; i < leaf.nelements(); ++i)  // 1 .. 8, Llama 3's range
                static_cast<float*>(leaf.data)[i] = 1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(leaf.nelements());
            } else {
              fill_random(leaf);
            }
          });
          ops::RopeParams p;
          p.mode = mode;
          p.n_rot = n_rot;
          p.freq_base = 5e5f;
          p.freq_scale = sc.freq_scale;
          p.ext_factor = sc.ext_factor;
          p.attn_factor = sc.attn_factor;
          p.beta_fast = sc.beta_fast;
          p.beta_slow = sc.beta_slow;
          p.n_ctx_orig = sc.n_ctx_orig;
          compare_cpu_cuda(
              [&](Context& c) {
                Tensor* base = c.new_tensor(DType::F32, {hd * 5, 33});
                Tensor* x = view(c, base, {hd, 3, 33}, {static_cast<size_t>(hd) * 4, base->nb[1]}, static_cast<size_t>(hd) * 4);
                Tensor* ff = sc.factors ? c.new_tensor(DType::F32, {n_rot / 2}, "freq_factors") : nullptr;
                return ops::rope(c, x, c.new_tensor(DType::I32, {33}), p, ff);
              },
              data, 1e-11, fmt::format("rope {} hd={} mode={} n_rot={}", sc.name, hd, static_cast<int>(mode), n_rot));
        }
}

}  // namespace
}  // namespace minfer::test
