// The fixture models on CUDA: the f16 files reproduce the Hugging Face references (logits max
// |diff| printed and bounded, the 32-token greedy continuation exact, through the captured
// decode graph), every fixture's perplexity is within 0.5 % of llama.cpp's, and a KV cache far
// too large for the GPU fails with OutOfMemoryError and a message, the rows of a verify batch carry
// exactly the logits of the matching decode steps, and speculative greedy output equals plain greedy.
// The reference and perplexity checks are tests/models/model_checks.h, shared with the CPU suite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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
#include "runtime/speculative.h"
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
                         ::testing::Combine(::testing::Values("qwen2-s", "qwen3-xs", "qwen2-yarn-s", "llama-s", "qwen3moe-s"),
                                            ::testing::Values(DType::F32, DType::F16)),
                         [](const auto& info) {
                           return model_case_name(std::get<0>(info.param)) + "_kv_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
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

TEST(CudaModels, VerifyBatchRowsEqualDecodeStepsBitwise) {
  // Speculative verification evaluates d + 1 tokens in one pass; plain decoding one at a time.
  // Every row of the batch must carry exactly the logits of the matching decode step, for the
  // weight types and layers of the fixtures (q/k/v bias, q_norm/k_norm, K-quants, f16, Q8_0).
  MINFER_REQUIRE_GPU();
  for (const char* name : {"qwen3-s/qwen3-s-Q4_K_M.gguf", "qwen2-s/qwen2-s-Q4_K_M.gguf", "qwen3-xs/qwen3-xs-f16.gguf",
                           "qwen3-xs/qwen3-xs-Q8_0.gguf"}) {
    auto file = open_fixture(name);
    const std::string dir = std::string(name).substr(0, std::string(name).find('/'));
    auto refs = load_refs(dir);
    if (!file || refs.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
    auto model = models::load(file, *gpu());
    const int32_t nv = model->hparams().n_vocab;
    for (size_t c : {size_t{0}, size_t{4}}) {  // a short code prompt; a 336-token held-out slice (depth)
      const auto& prompt = refs[c].ids;
      SessionParams sp;
      sp.n_ctx = 512;
      // Up to 8 rows (kMmvqRows; speculative decoding's default --draft-max 7 verifies 8) the
      // batch runs the decode kernels; past it the tensor-core MMQ, whose rows agree with each
      // other across batch sizes (test_cuda_ops) but not bitwise with the 1-row MMVQ.
      for (int32_t n : {2, 5, 8}) {
        const std::vector<int32_t> next(refs[c].greedy32.begin(), refs[c].greedy32.begin() + n);
        Session batch(*model, *gpu(), sp), step(*model, *gpu(), sp);
        batch.eval(prompt);
        step.eval(prompt);
        auto all = batch.eval(next, /*all_logits=*/true);
        const std::vector<float> rows(all.begin(), all.end());
        for (int32_t i = 0; i < n; ++i) {
          auto l = step.eval(std::span<const int32_t>(&next[static_cast<size_t>(i)], 1));
          ASSERT_TRUE(std::isfinite(l[0]));
          EXPECT_EQ(std::memcmp(l.data(), rows.data() + static_cast<size_t>(i) * nv, static_cast<size_t>(nv) * 4), 0)
              << name << " prompt " << c << ": row " << i << " of a " << n << "-token batch differs from decode step " << i;
        }
      }
    }
  }
}

TEST(CudaSpeculative, GreedyOutputIdenticalToPlainDecoding) {
  // The pair on CUDA: target qwen3-s Q4_K_M, draft qwen3-xs Q8_0, the 5 reference prompts,
  // 64 tokens each. Divergences are counted (first differing position per prompt) and printed.
  MINFER_REQUIRE_GPU();
  auto tf = open_fixture("qwen3-s/qwen3-s-Q4_K_M.gguf"), df = open_fixture("qwen3-xs/qwen3-xs-Q8_0.gguf");
  auto refs = load_refs("qwen3-s");
  if (!tf || !df || refs.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  auto target = models::load(tf, *gpu());
  auto draft = models::load(df, *gpu());
  auto tok = tokenizer::Tokenizer::from_gguf(*tf), dtok = tokenizer::Tokenizer::from_gguf(*df);
  SessionParams sp;
  sp.n_ctx = 512;
  SamplerParams greedy;
  greedy.temp = 0;
  GenerateParams gp;
  gp.n_predict = 64;
  gp.stop_at_eog = false;
  int64_t tokens = 0, flips = 0;
  for (size_t c = 0; c < refs.size(); ++c) {
    Session plain(*target, *gpu(), sp);
    Sampler s1(greedy);
    const auto ref = generate(plain, tok, s1, refs[c].ids, gp);
    // Fixed depths 7 and 15 put verify batches up to 16 rows through the kernels; adaptive is what users run.
    for (int32_t mode : {3, 7, 0}) {
      const bool adaptive = mode == 0;
      Session ts(*target, *gpu(), sp), ds(*draft, *gpu(), sp);
      SpeculativeParams spp;
      spp.n_draft = adaptive ? 15 : mode;
      spp.adaptive = adaptive;
      SpeculativeDecoder dec(ts, tok, ds, dtok, spp);
      Sampler s2(greedy);
      const auto got = dec.generate(tok, s2, refs[c].ids, gp);
      size_t first = 0;
      while (first < ref.ids.size() && first < got.ids.size() && ref.ids[first] == got.ids[first]) ++first;
      tokens += static_cast<int64_t>(ref.ids.size());
      if (first < ref.ids.size() || got.ids.size() != ref.ids.size()) ++flips;
      std::printf("[ cuda spec ] prompt %zu %s: %zu tokens, identical prefix %zu, acceptance %.1f%%, %lld verify passes\n", c,
                  adaptive ? "adaptive" : mode == 7 ? "depth 7" : "depth 3", got.ids.size(), first, 100 * dec.stats().acceptance_rate(),
                  static_cast<long long>(dec.stats().n_rounds));
      EXPECT_EQ(got.ids, ref.ids) << "prompt " << c << (adaptive ? " adaptive" : " fixed depth ") << mode << " diverges at token " << first;
    }
  }
  std::printf("[ cuda spec ] %lld tokens, %lld divergences\n", static_cast<long long>(tokens), static_cast<long long>(flips));
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
