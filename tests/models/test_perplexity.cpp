// Perplexity of every fixture on text/python-val.txt (-c 256, 100 chunks) within 0.5 % of
// llama.cpp's figure in the fixtures README.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/test_util.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {
namespace {

struct PplCase {
  const char* file;
  double llama_ppl;
};

void PrintTo(const PplCase& c, std::ostream* os) { *os << c.file; }

class Perplexity : public ::testing::TestWithParam<PplCase> {};

TEST_P(Perplexity, WithinHalfPercentOfLlamaCpp) {
  const PplCase c = GetParam();
  auto file = open_fixture(c.file);
  auto text_path = fixture("text/python-val.txt");
  if (!file || text_path.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  std::ifstream in(text_path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  auto tokens = tok.encode(ss.str(), /*parse_special=*/false);
  CpuBackend cpu(0);
  auto model = models::load(file, cpu);
  SessionParams sp;
  sp.n_ctx = 256;
  Session s(*model, cpu, sp);
  auto r = perplexity(s, tokens, 100);
  std::printf("[ %s ] PPL = %.4f +/- %.5f over %d chunks (llama.cpp %.4f, diff %+.3f %%)\n", c.file, r.ppl, r.ppl_stderr,
              r.n_chunks, c.llama_ppl, 100.0 * (r.ppl / c.llama_ppl - 1.0));
  EXPECT_EQ(r.n_chunks, 100);
  EXPECT_NEAR(r.ppl / c.llama_ppl, 1.0, 0.005);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Perplexity,
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

}  // namespace
}  // namespace minfer::test
