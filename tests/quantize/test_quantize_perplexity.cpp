// Models quantized by minfer's quantize_file score, with minfer's runtime, within 1 % of the
// perplexity llama.cpp measured on its own quantization of the same model (fixtures README:
// text/python-val.txt, -c 256, first 100 chunks).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/test_util.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "quantize/quantize_file.h"
#include "quantize_test_util.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {
namespace {

struct PplCase {
  const char* f16;
  const char* type;
  double llama_ppl;
};

void PrintTo(const PplCase& c, std::ostream* os) { *os << c.f16 << " -> " << c.type; }

class QuantizedPerplexity : public ::testing::TestWithParam<PplCase> {};

TEST_P(QuantizedPerplexity, WithinOnePercentOfLlamaCpp) {
  const PplCase c = GetParam();
  const auto in = fixture(c.f16);
  const auto text_path = fixture("text/python-val.txt");
  if (in.empty() || text_path.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  TempPath out(std::string("ppl-") + c.type);
  quantize::QuantizeParams p;
  p.target = quantize::parse_target(c.type);
  quantize::quantize_file(in, out.path(), p);

  auto file = std::make_shared<const gguf::File>(out.path());
  for (const auto& t : file->tensors()) {
    const auto v = dequantize_tensor(t);
    for (float x : v) ASSERT_TRUE(std::isfinite(x)) << t.name;
  }
  std::ifstream txt(text_path);
  std::stringstream ss;
  ss << txt.rdbuf();
  const auto tok = tokenizer::Tokenizer::from_gguf(*file);
  const auto tokens = tok.encode(ss.str(), /*parse_special=*/false);
  CpuBackend cpu(0);
  auto model = models::load(file, cpu);
  ModelRunner runner(*model, cpu, perplexity_runner_params(256, 512, DType::F16));
  const auto r = perplexity(runner, tokens, 256, 100);
  std::printf("[ %s -> %s ] PPL = %.4f +/- %.5f over %d chunks (llama.cpp's %s: %.4f, diff %+.3f %%)\n", c.f16, c.type,
              r.ppl, r.ppl_stderr, r.n_chunks, c.type, c.llama_ppl, 100.0 * (r.ppl / c.llama_ppl - 1.0));
  EXPECT_EQ(r.n_chunks, 100);
  EXPECT_TRUE(std::isfinite(r.ppl));
  EXPECT_NEAR(r.ppl / c.llama_ppl, 1.0, 0.01);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizedPerplexity,
                         ::testing::Values(PplCase{"qwen2-s/qwen2-s-f16.gguf", "Q4_K_M", 45.9957},
                                           PplCase{"qwen2-s/qwen2-s-f16.gguf", "Q5_K_M", 45.3998},
                                           PplCase{"qwen3-xs/qwen3-xs-f16.gguf", "Q8_0", 42.1562},
                                           PplCase{"qwen3-xs/qwen3-xs-f16.gguf", "Q4_0", 44.3368},
                                           PplCase{"qwen3-xs/qwen3-xs-f16.gguf", "Q5_1", 42.6234}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.f16).substr(0, std::string(info.param.f16).find('/'));
                           n += std::string("_") + info.param.type;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace minfer::test
