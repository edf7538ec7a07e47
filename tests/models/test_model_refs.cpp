// Qwen2 and Qwen3 f16 fixtures on the CPU reproduce the Hugging Face float64 references: logits
// within 1e-3 (the actual maximum is printed) and the 32-token greedy continuation exactly.
// With an f32 KV cache the forward pass itself is compared (max |diff| ~1e-5); with the default
// f16 cache, rounding K and V to f16 moves logits by a few 1e-3, so that run asserts 1e-2 and the
// exact greedy text.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace minfer::test {
namespace {

class ModelRefs : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(ModelRefs, LogitsAndGreedyMatchHuggingFace) {
  const std::string name = std::get<0>(GetParam());
  const DType kv_type = std::get<1>(GetParam());
  const double tol = kv_type == DType::F32 ? 1e-3 : 1e-2;
  auto file = open_fixture(name + "/" + name + "-f16.gguf");
  auto refs = load_refs(name);
  if (!file || refs.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  CpuBackend cpu(2);
  auto model = models::load(file, cpu);
  SessionParams sp;
  sp.n_ctx = 512;
  sp.kv_type = kv_type;
  Session s(*model, cpu, sp);
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
    std::printf("[ %s kv %s ] case %zu: %zu prompt tokens, logits max |diff| vs HF = %.3g\n", name.c_str(),
                std::string(dtype_name(kv_type)).c_str(), ci, rc.ids.size(), md);
    worst = std::max(worst, md);
    EXPECT_LT(md, tol) << name << " case " << ci;
    // Greedy continuation: argmax, one token at a time through the decode path.
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
  std::printf("[ %s kv %s ] worst logits max |diff| over %zu cases = %.3g\n", name.c_str(),
              std::string(dtype_name(kv_type)).c_str(), refs.size(), worst);
}

INSTANTIATE_TEST_SUITE_P(F16Fixtures, ModelRefs,
                         ::testing::Combine(::testing::Values("qwen2-s", "qwen3-xs"),
                                            ::testing::Values(DType::F32, DType::F16)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_kv_" + std::string(dtype_name(std::get<1>(info.param)));
                           for (char& ch : n) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace minfer::test
