// Perplexity of every fixture on text/python-val.txt (-c 256, 100 chunks; qwen2-yarn-s and llama-s
// also -c 2048, 20 chunks) on the CPU within 0.5 % of llama.cpp's figure in the fixtures README.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "model_checks.h"
#include "ops/cpu/cpu_backend.h"

namespace minfer::test {
namespace {

class Perplexity : public ::testing::TestWithParam<PplCase> {};

TEST_P(Perplexity, WithinHalfPercentOfLlamaCpp) {
  if (!have_ppl_fixture(GetParam())) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  CpuBackend cpu(0);
  check_perplexity(cpu, GetParam(), "cpu");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Perplexity, ::testing::ValuesIn(kPplCases),
                         [](const auto& info) { return ppl_case_name(info.param); });

}  // namespace
}  // namespace minfer::test
