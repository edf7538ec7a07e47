// The encoders against llama.cpp's llama-quantize on the shared fixture models: re-quantizing
// the f16 weights must reproduce llama-quantize's K-quant bytes exactly (same searches, same
// f32 arithmetic), and must not be worse per block for the 32-element formats (whose search
// includes ggml's reference encoding as one candidate).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tensor/quants.h"
#include "gguf_mini.h"
#include "quants_test_util.h"

#ifndef MINFER_FIXTURES_DEFAULT
#define MINFER_FIXTURES_DEFAULT "../shared/fixtures"
#endif

namespace minfer {
namespace {

std::string fixture(const std::string& rel) {
  const char* env = std::getenv("MINFER_FIXTURES");
  return std::string(env && *env ? env : MINFER_FIXTURES_DEFAULT) + "/" + rel;
}

struct Compared {
  int tensors = 0;
  int64_t blocks = 0, differing_blocks = 0, worse_blocks = 0;
};

// Re-quantizes every block-type tensor of `quant_file` from the same tensor of `f16_file`.
Compared compare_with_llama(const std::string& f16_file, const std::string& quant_file) {
  const test::MiniGguf f16(f16_file), q(quant_file);
  Compared c;
  for (const auto& [name, t] : q.tensors()) {
    const DType qt = static_cast<DType>(t.type);
    const auto it = f16.tensors().find(name);
    if (it == f16.tensors().end() || !dtype_is_quantized(qt)) continue;
    SCOPED_TRACE(name + " " + std::string(dtype_name(qt)));
    const int64_t n = t.nelements();
    std::vector<float> x(static_cast<size_t>(n));
    dequantize_row(static_cast<DType>(it->second.type), it->second.data, x.data(), n);
    std::vector<uint8_t> mine(dtype_row_size(qt, n));
    quantize_row(qt, x.data(), mine.data(), n);
    std::vector<float> ym(static_cast<size_t>(n)), yl(static_cast<size_t>(n));
    test::poison(ym);
    test::poison(yl);
    dequantize_row(qt, mine.data(), ym.data(), n);
    dequantize_row(qt, t.data, yl.data(), n);
    const int64_t qk = dtype_block_size(qt);
    const size_t bs = dtype_type_size(qt);
    for (int64_t b = 0; b < n / qk; ++b) {
      ++c.blocks;
      if (std::memcmp(mine.data() + b * bs, t.data + b * bs, bs) != 0) ++c.differing_blocks;
      double em = 0, el = 0;
      for (int64_t i = b * qk; i < (b + 1) * qk; ++i) {
        EXPECT_TRUE(std::isfinite(ym[i]) && std::isfinite(yl[i])) << "element " << i;
        em += (static_cast<double>(x[i]) - ym[i]) * (static_cast<double>(x[i]) - ym[i]);
        el += (static_cast<double>(x[i]) - yl[i]) * (static_cast<double>(x[i]) - yl[i]);
      }
      if (em > el * (1 + 1e-6) + 1e-30) ++c.worse_blocks;
    }
    ++c.tensors;
  }
  return c;
}

TEST(QuantsFixtures, KQuantsReproduceLlamaQuantizeBitExact) {
  const std::string f16 = fixture("qwen2-s/qwen2-s-f16.gguf");
  if (!std::filesystem::exists(f16)) GTEST_SKIP() << "fixtures not found at " << f16;
  for (const char* file : {"qwen2-s/qwen2-s-Q4_K_M.gguf", "qwen2-s/qwen2-s-Q5_K_M.gguf"}) {
    SCOPED_TRACE(file);
    const Compared c = compare_with_llama(f16, fixture(file));
    EXPECT_GT(c.tensors, 20);
    EXPECT_EQ(c.differing_blocks, 0) << "of " << c.blocks << " blocks";
  }
}

TEST(QuantsFixtures, LegacyFormatsNeverWorseThanLlamaQuantize) {
  const std::string f16 = fixture("qwen3-xs/qwen3-xs-f16.gguf");
  if (!std::filesystem::exists(f16)) GTEST_SKIP() << "fixtures not found at " << f16;
  for (const char* file : {"qwen3-xs/qwen3-xs-Q4_0.gguf", "qwen3-xs/qwen3-xs-Q5_1.gguf", "qwen3-xs/qwen3-xs-Q8_0.gguf"}) {
    SCOPED_TRACE(file);
    const Compared c = compare_with_llama(f16, fixture(file));
    EXPECT_GT(c.tensors, 10);
    EXPECT_EQ(c.worse_blocks, 0) << "of " << c.blocks << " blocks";
  }
}

// Relative RMSE of every encoder on trained weights (the 2-D weights of layers 0 and 1 of
// qwen2-s), with ceilings ~20% above the measured values.
TEST(QuantsFixtures, RmseOnTrainedWeights) {
  const std::string f16 = fixture("qwen2-s/qwen2-s-f16.gguf");
  if (!std::filesystem::exists(f16)) GTEST_SKIP() << "fixtures not found at " << f16;
  const test::MiniGguf g(f16);
  std::vector<float> x;
  for (const auto& [name, t] : g.tensors()) {
    if (t.ne.size() != 2 || (name.rfind("blk.0.", 0) != 0 && name.rfind("blk.1.", 0) != 0)) continue;
    const size_t at = x.size();
    x.resize(at + static_cast<size_t>(t.nelements()));
    dequantize_row(static_cast<DType>(t.type), t.data, x.data() + at, t.nelements());
  }
  ASSERT_GT(x.size(), 500000u);
  const int64_t n = static_cast<int64_t>(x.size());
  const struct {
    DType t;
    double ceiling;
  } cases[] = {{DType::Q8_0, 0.0060}, {DType::Q6_K, 0.0215}, {DType::Q5_1, 0.0405}, {DType::Q5_0, 0.0480},
               {DType::Q5_K, 0.0435}, {DType::Q4_1, 0.0800}, {DType::Q4_0, 0.0970}, {DType::Q4_K, 0.0860},
               {DType::Q3_K, 0.1750}, {DType::Q2_K, 0.3300}};
  for (const auto& c : cases) {
    std::vector<uint8_t> q(dtype_row_size(c.t, n));
    quantize_row(c.t, x.data(), q.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(c.t, q.data(), y.data(), n);
    double sse = 0, ss = 0;
    for (int64_t i = 0; i < n; ++i) {
      sse += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
      ss += static_cast<double>(x[i]) * x[i];
    }
    const double rel = std::sqrt(sse / ss);
    std::printf("[ quants  ] %-5s trained weights relative RMSE %.3f%% (ceiling %.2f%%)\n",
                std::string(dtype_name(c.t)).c_str(), 100 * rel, 100 * c.ceiling);
    EXPECT_LT(rel, c.ceiling) << dtype_name(c.t);
  }
}

}  // namespace
}  // namespace minfer
