// The fixture models on CUDA: the f16 files reproduce the Hugging Face references (logits max
// |diff| printed and bounded, the 32-token greedy continuation exact, through the captured
// decode graph), every fixture's perplexity is within 0.5 % of llama.cpp's, and a KV cache far
// too large for the GPU fails with OutOfMemoryError and a message.
// Mirrors tests/models/test_model_refs.cpp and tests/models/test_perplexity.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/test_util.h"
#include "cuda_test_util.h"
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
  const std::string name = std::get<0>(GetParam());
  const DType kv_type = std::get<1>(GetParam());
  const double tol = kv_type == DType::F32 ? 1e-3 : 1e-2;
  auto file = open_fixture(name + "/" + name + "-f16.gguf");
  auto refs = load_refs(name);
  if (!file || refs.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  CudaBackend& g = *gpu();
  auto model = models::load(file, g);
  SessionParams sp;
  sp.n_ctx = 512;
  sp.kv_type = kv_type;
  Session s(*model, g, sp);
  const auto before = g.stats();
  double worst = 0;
  for (size_t ci = 0; ci < refs.size(); ++ci) {
    const RefCase& rc = refs[ci];
    ASSERT_EQ(rc.vocab, model->hparams().n_vocab);
    s.reset();
    auto logits = s.eval(rc.ids, /*all_logits=*/true);
    double md = 0;
    for (int32_t row = rc.row_begin; row < rc.row_end; ++row)
      for (int32_t v = 0; v < rc.vocab; ++v) {
        const float got = logits[static_cast<size_t>(row) * static_cast<size_t>(rc.vocab) + static_cast<size_t>(v)];
        const float ref = rc.logits[static_cast<size_t>(row - rc.row_begin) * static_cast<size_t>(rc.vocab) + static_cast<size_t>(v)];
        ASSERT_TRUE(std::isfinite(got)) << "case " << ci << " row " << row << " token " << v;
        md = std::max(md, static_cast<double>(std::abs(got - ref)));
      }
    std::printf("[ cuda %s kv %s ] case %zu: %zu prompt tokens, logits max |diff| vs HF = %.3g\n", name.c_str(),
                std::string(dtype_name(kv_type)).c_str(), ci, rc.ids.size(), md);
    worst = std::max(worst, md);
    EXPECT_LT(md, tol) << name << " case " << ci;
    std::vector<int32_t> got;
    std::vector<float> last(logits.end() - rc.vocab, logits.end());
    for (int i = 0; i < 32; ++i) {
      const int32_t id = argmax(last);
      got.push_back(id);
      if (i == 31) break;
      const int32_t one[1] = {id};
      auto l = s.eval(one);
      last.assign(l.begin(), l.end());
    }
    EXPECT_EQ(got, rc.greedy32) << name << " case " << ci << ": greedy continuation differs";
  }
  const auto after = g.stats();
  std::printf("[ cuda %s kv %s ] worst logits max |diff| over %zu cases = %.3g; CUDA graphs: %llu captured, %llu "
              "replays\n",
              name.c_str(), std::string(dtype_name(kv_type)).c_str(), refs.size(), worst,
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
                           std::string n = std::get<0>(info.param) + "_kv_" + std::string(dtype_name(std::get<1>(info.param)));
                           for (char& ch : n) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

struct PplCase {
  const char* file;
  double llama_ppl;
};

class CudaPerplexity : public ::testing::TestWithParam<PplCase> {};

TEST_P(CudaPerplexity, WithinHalfPercentOfLlamaCpp) {
  MINFER_REQUIRE_GPU();
  const PplCase c = GetParam();
  auto file = open_fixture(c.file);
  auto text_path = fixture("text/python-val.txt");
  if (!file || text_path.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  std::ifstream in(text_path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  auto tokens = tok.encode(ss.str(), /*parse_special=*/false);
  auto model = models::load(file, *gpu());
  SessionParams sp;
  sp.n_ctx = 256;
  Session s(*model, *gpu(), sp);
  auto r = perplexity(s, tokens, 100);
  std::printf("[ cuda %s ] PPL = %.4f +/- %.5f over %d chunks (llama.cpp %.4f, diff %+.3f %%)\n", c.file, r.ppl,
              r.ppl_stderr, r.n_chunks, c.llama_ppl, 100.0 * (r.ppl / c.llama_ppl - 1.0));
  EXPECT_EQ(r.n_chunks, 100);
  EXPECT_NEAR(r.ppl / c.llama_ppl, 1.0, 0.005);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaPerplexity,
                         ::testing::Values(PplCase{"qwen2-s/qwen2-s-f16.gguf", 45.0255},
                                           PplCase{"qwen2-s/qwen2-s-Q4_K_M.gguf", 45.9957},
                                           PplCase{"qwen2-s/qwen2-s-Q5_K_M.gguf", 45.3998},
                                           PplCase{"qwen3-s/qwen3-s-Q4_K_M.gguf", 46.8323},
                                           PplCase{"qwen3-xs/qwen3-xs-f16.gguf", 42.1421},
                                           PplCase{"qwen3-xs/qwen3-xs-Q8_0.gguf", 42.1562},
                                           PplCase{"qwen3-xs/qwen3-xs-Q4_0.gguf", 44.3368},
                                           PplCase{"qwen3-xs/qwen3-xs-Q5_1.gguf", 42.6234}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           n = n.substr(n.find('/') + 1);
                           for (char& ch : n) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

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
