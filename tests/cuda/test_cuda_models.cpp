// The fixture models on CUDA: the f16 files reproduce the Hugging Face references (logits max
// |diff| printed and bounded, the 32-token greedy continuation exact, through the captured
// decode graph), every fixture's perplexity is within 0.5 % of llama.cpp's, and a KV cache far
// too large for the GPU fails with OutOfMemoryError and a message.
// The reference and perplexity checks are tests/models/model_checks.h, shared with the CPU suite.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/test_util.h"
#include "cuda_test_util.h"
#include "model_checks.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "runtime/perplexity.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {
namespace {

class CudaModelRefs : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(CudaModelRefs, LogitsAndGreedyMatchHuggingFace) {
  MINFER_REQUIRE_GPU();
  const auto& [name, kv_type] = GetParam();
  if (!have_refs(name)) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  CudaBackend& g = *gpu();
  const auto before = g.stats();
  check_model_refs(g, name, kv_type, "cuda");
  const auto after = g.stats();
  std::printf("[ cuda %s kv %s ] CUDA graphs: %llu captured, %llu replays\n", name.c_str(),
              std::string(dtype_name(kv_type)).c_str(),
              static_cast<unsigned long long>(after.graph_captures - before.graph_captures),
              static_cast<unsigned long long>(after.graph_replays - before.graph_replays));
  if (g.graphs_enabled()) {
    EXPECT_GE(after.graph_replays - before.graph_replays, 100u) << "decode steps were not replayed";
  }
}

INSTANTIATE_TEST_SUITE_P(F16Fixtures, CudaModelRefs,
                         ::testing::Combine(::testing::Values("qwen2-s", "qwen3-xs"),
                                            ::testing::Values(DType::F32, DType::F16)),
                         [](const auto& info) {
                           return std::get<0>(info.param).substr(0, 5) + "_" + std::get<0>(info.param).substr(6) +
                                  "_kv_" + std::string(dtype_name(std::get<1>(info.param)));
                         });

class CudaPerplexity : public ::testing::TestWithParam<PplCase> {};

TEST_P(CudaPerplexity, WithinHalfPercentOfLlamaCpp) {
  MINFER_REQUIRE_GPU();
  if (!have_ppl_fixture(GetParam())) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  check_perplexity(*gpu(), GetParam(), "cuda");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaPerplexity, ::testing::ValuesIn(kPplCases),
                         [](const auto& info) { return ppl_case_name(info.param); });

TEST(CudaModels, DecodeMatchesPrefillLogits) {
  // The decode path (MMVQ, split-KV attention, graph replay) against the prefill path (GEMM, tiled
  // attention) on a quantized model: the last prompt position's logits agree closely.
  MINFER_REQUIRE_GPU();
  auto file = open_fixture("qwen3-s/qwen3-s-Q4_K_M.gguf");
  auto refs = load_refs("qwen3-s");
  if (!file || refs.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  auto model = models::load(file, *gpu());
  SessionParams sp;
  sp.n_ctx = 256;
  Session a(*model, *gpu(), sp), b(*model, *gpu(), sp);
  const auto& ids = refs[1].ids;
  auto full = a.eval(ids);  // one prefill
  std::vector<float> pre(full.begin(), full.end());
  std::vector<float> dec;
  for (size_t i = 0; i < ids.size(); ++i) {  // token by token
    const int32_t one[1] = {ids[i]};
    auto l = b.eval(one);
    dec.assign(l.begin(), l.end());
  }
  double md = 0, mx = 0;
  for (size_t i = 0; i < pre.size(); ++i) {
    md = std::max(md, static_cast<double>(std::abs(pre[i] - dec[i])));
    mx = std::max(mx, static_cast<double>(std::abs(pre[i])));
  }
  std::printf("[ cuda qwen3-s Q4_K_M ] prefill vs token-by-token decode: max |diff| %.3g (max |logit| %.3g)\n", md, mx);
  EXPECT_LT(md, 0.05 * std::max(1.0, mx));
  EXPECT_EQ(argmax(pre), argmax(dec));
}

TEST(CudaModels, KvCacheFarTooLargeIsOutOfMemoryError) {
  MINFER_REQUIRE_GPU();
  auto file = open_fixture("qwen2-s/qwen2-s-f16.gguf");
  if (!file) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  auto model = models::load(file, *gpu());
  SessionParams sp;
  sp.n_ctx = 200'000'000;  // 4 layers x 2 KV heads x 64 x 2 (k, v) x 2 bytes = 2 KiB a position: 400 GB
  try {
    Session s(*model, *gpu(), sp);
    FAIL() << "a 400 GB KV cache was allocated";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    std::printf("[ oom ] %s\n", m.c_str());
    EXPECT_NE(m.find("KV cache"), std::string::npos) << m;
    EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
  }
  // The GPU still works after the failure.
  SessionParams ok;
  ok.n_ctx = 64;
  Session s(*model, *gpu(), ok);
  const int32_t t[2] = {1, 2};
  auto l = s.eval(t);
  EXPECT_TRUE(std::isfinite(l[0]));
}

}  // namespace
}  // namespace minfer::test
