// RoPE scaling hyper-parameters: HParams reads llama.cpp's GGUF keys (rope.scaling.type, .factor,
// .original_context_length, .attn_factor, .yarn_*; the old rope.scale_linear) with its defaults,
// rope_params() resolves them as llama.cpp's context does, llama.cpp's flags override them, and
// the fixtures' files encode what their Hugging Face configs say (qwen2-yarn-s's YaRN, llama-s's
// llama3 frequency factors).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numbers>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/model.h"

namespace minfer::test {
namespace {

TEST(RopeHParams, GgufKeysWithLlamaCppDefaults) {
  {  // no scaling keys: plain RoPE
    const HParams h = minimal_qwen2_hparams([](gguf::Writer&) {});
    EXPECT_EQ(h.rope_scaling, RopeScaling::NONE);
    const ops::RopeParams r = h.rope_params();
    EXPECT_EQ(r.n_rot, 32);
    EXPECT_EQ(r.freq_base, 1e6f);
    EXPECT_EQ(r.freq_scale, 1.0f);
    EXPECT_EQ(r.ext_factor, 0.0f);
    EXPECT_EQ(r.attn_factor, 1.0f);
  }
  {  // linear
    const ops::RopeParams r = minimal_qwen2_hparams([](gguf::Writer& w) {
      w.set_string("qwen2.rope.scaling.type", "linear");
      w.set_f32("qwen2.rope.scaling.factor", 4.0f);
    }).rope_params();
    EXPECT_EQ(r.freq_scale, 0.25f);
    EXPECT_EQ(r.ext_factor, 0.0f);
    EXPECT_EQ(r.attn_factor, 1.0f);
  }
  {  // the old key, no type: linear, as llama.cpp reads it
    const HParams h = minimal_qwen2_hparams([](gguf::Writer& w) { w.set_f32("qwen2.rope.scale_linear", 2.0f); });
    EXPECT_EQ(h.rope_scaling, RopeScaling::LINEAR);
    EXPECT_EQ(h.rope_params().freq_scale, 0.5f);
  }
  {  // YaRN with the defaults: ext_factor 1, magnitude 0.1 ln(factor) + 1, betas 32 / 1
    const HParams h = minimal_qwen2_hparams([](gguf::Writer& w) {
      w.set_string("qwen2.rope.scaling.type", "yarn");
      w.set_f32("qwen2.rope.scaling.factor", 4.0f);
      w.set_u32("qwen2.rope.scaling.original_context_length", 512);
    });
    EXPECT_EQ(h.rope_scaling, RopeScaling::YARN);
    const ops::RopeParams r = h.rope_params();
    EXPECT_EQ(r.freq_scale, 0.25f);
    EXPECT_EQ(r.ext_factor, 1.0f);
    EXPECT_FLOAT_EQ(r.attn_factor, static_cast<float>(0.1 * std::log(4.0) + 1.0));
    EXPECT_EQ(r.n_ctx_orig, 512);
    EXPECT_EQ(r.beta_fast, 32.0f);
    EXPECT_EQ(r.beta_slow, 1.0f);
  }
  {  // YaRN with every key: Transformers' attention_factor replaces the magnitude, times attn_factor
    const ops::RopeParams r = minimal_qwen2_hparams([](gguf::Writer& w) {
      w.set_string("qwen2.rope.scaling.type", "yarn");
      w.set_f32("qwen2.rope.scaling.factor", 8.0f);
      w.set_f32("qwen2.rope.scaling.attn_factor", 0.8f);
      w.set_f32("qwen2.rope.scaling.yarn_attn_factor", 1.5f);
      w.set_f32("qwen2.rope.scaling.yarn_ext_factor", 0.5f);
      w.set_f32("qwen2.rope.scaling.yarn_beta_fast", 16.0f);
      w.set_f32("qwen2.rope.scaling.yarn_beta_slow", 2.0f);
    }).rope_params();
    EXPECT_EQ(r.freq_scale, 0.125f);
    EXPECT_EQ(r.ext_factor, 0.5f);
    EXPECT_FLOAT_EQ(r.attn_factor, 1.2f);
    EXPECT_EQ(r.n_ctx_orig, 4096);  // no original_context_length: context_length
    EXPECT_EQ(r.beta_fast, 16.0f);
    EXPECT_EQ(r.beta_slow, 2.0f);
  }
  EXPECT_THROW(minimal_qwen2_hparams([](gguf::Writer& w) { w.set_string("qwen2.rope.scaling.type", "longrope"); }),
               std::invalid_argument);
  EXPECT_THROW(minimal_qwen2_hparams([](gguf::Writer& w) { w.set_f32("qwen2.rope.freq_base", -1.0f); }), std::invalid_argument);
}

TEST(RopeHParams, FlagsOverrideLikeLlamaCpp) {
  const HParams yarn = minimal_qwen2_hparams([](gguf::Writer& w) {
    w.set_string("qwen2.rope.scaling.type", "yarn");
    w.set_f32("qwen2.rope.scaling.factor", 4.0f);
    w.set_u32("qwen2.rope.scaling.original_context_length", 512);
  });
  {  // --rope-scaling none: never scales
    HParams h = yarn;
    h.apply({.scaling = RopeScaling::NONE});
    const ops::RopeParams r = h.rope_params();
    EXPECT_EQ(r.freq_scale, 1.0f);
    EXPECT_EQ(r.ext_factor, 0.0f);
    EXPECT_EQ(r.attn_factor, 1.0f);
  }
  {  // --rope-scale 8 --yarn-orig-ctx 1024 --yarn-beta-fast 24 --yarn-beta-slow 2 --rope-freq-base 5e5
    HParams h = yarn;
    h.apply({.scale = 8.0f, .freq_base = 5e5f, .yarn_orig_ctx = 1024, .yarn_beta_slow = 2.0f, .yarn_beta_fast = 24.0f});
    const ops::RopeParams r = h.rope_params();
    EXPECT_EQ(r.freq_scale, 0.125f);
    EXPECT_EQ(r.freq_base, 5e5f);
    EXPECT_FLOAT_EQ(r.attn_factor, static_cast<float>(0.1 * std::log(8.0) + 1.0));
    EXPECT_EQ(r.n_ctx_orig, 1024);
    EXPECT_EQ(r.beta_fast, 24.0f);
    EXPECT_EQ(r.beta_slow, 2.0f);
  }
  {  // --rope-freq-scale 0.5 --yarn-ext-factor 0 --yarn-attn-factor 1.1
    HParams h = yarn;
    h.apply({.freq_scale = 0.5f, .yarn_ext_factor = 0.0f, .yarn_attn_factor = 1.1f});
    const ops::RopeParams r = h.rope_params();
    EXPECT_EQ(r.freq_scale, 0.5f);
    EXPECT_EQ(r.ext_factor, 0.0f);
    EXPECT_FLOAT_EQ(r.attn_factor, 1.1f);
  }
  {  // --rope-scaling yarn --rope-scale 2 on a plain model: YaRN over context_length
    HParams h = minimal_qwen2_hparams([](gguf::Writer&) {});
    h.apply({.scaling = RopeScaling::YARN, .scale = 2.0f});
    const ops::RopeParams r = h.rope_params();
    EXPECT_EQ(r.ext_factor, 1.0f);
    EXPECT_EQ(r.freq_scale, 0.5f);
    EXPECT_EQ(r.n_ctx_orig, 4096);
  }
  {  // rejected values leave the hyper-parameters as they were
    HParams h = yarn;
    EXPECT_THROW(h.apply({.freq_base = -1.0f}), std::invalid_argument);
    EXPECT_THROW(h.apply({.scale = 0.0f}), std::invalid_argument);
    EXPECT_THROW(h.apply({.yarn_orig_ctx = 0, .yarn_beta_fast = 0.0f}), std::invalid_argument);
    EXPECT_EQ(h.rope_freq_base, 1e6f);
    EXPECT_EQ(h.rope_params().freq_scale, 0.25f);
  }
  EXPECT_EQ(rope_scaling_from_name("yarn"), RopeScaling::YARN);
  EXPECT_EQ(rope_scaling_from_name("linear"), RopeScaling::LINEAR);
  EXPECT_EQ(rope_scaling_from_name("none"), RopeScaling::NONE);
  EXPECT_FALSE(rope_scaling_from_name("llama3"));
}

nlohmann::json hf_config(const std::string& dir) {
  std::ifstream in(fixture(dir + "/hf_config.json"));
  return nlohmann::json::parse(in);
}

TEST(RopeHParams, Qwen2YarnFixtureEncodesItsHfConfig) {
  auto file = open_fixture("qwen2-yarn-s/qwen2-yarn-s-f16.gguf");
  if (!file || fixture("qwen2-yarn-s/hf_config.json").empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const auto rp = hf_config("qwen2-yarn-s").at("rope_parameters");
  ASSERT_EQ(rp.at("rope_type"), "yarn");
  const ops::RopeParams r = HParams::from_gguf(*file, ops::RopeMode::NEOX).rope_params();
  EXPECT_EQ(r.freq_base, rp.at("rope_theta").get<float>());
  EXPECT_FLOAT_EQ(1.0f / r.freq_scale, rp.at("factor").get<float>());
  EXPECT_EQ(r.n_ctx_orig, rp.at("original_max_position_embeddings").get<int32_t>());
  EXPECT_EQ(r.ext_factor, 1.0f);
  EXPECT_FLOAT_EQ(r.attn_factor, static_cast<float>(0.1 * std::log(rp.at("factor").get<double>()) + 1.0));
}

TEST(RopeHParams, Llama3FixtureFactorsAreTransformersSmoothing) {
  // llama-s's rope_freqs.weight divides each default frequency into Transformers' llama3
  // inv_freq (_compute_llama3_parameters) for its config: the factors ops::rope takes.
  auto file = open_fixture("llama-s/llama-s-f16.gguf");
  if (!file || fixture("llama-s/hf_config.json").empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const auto cfg = hf_config("llama-s");
  const auto rp = cfg.at("rope_parameters");
  ASSERT_EQ(rp.at("rope_type"), "llama3");
  const double base = rp.at("rope_theta"), factor = rp.at("factor"), lo = rp.at("low_freq_factor"),
               hi = rp.at("high_freq_factor"), orig = rp.at("original_max_position_embeddings");
  const int dim = cfg.at("head_dim");
  const gguf::TensorInfo& t = file->tensor("rope_freqs.weight");
  ASSERT_EQ(t.type, DType::F32);
  ASSERT_EQ(t.ne[0], dim / 2);
  const float* ff = reinterpret_cast<const float*>(t.data);
  int n_scaled = 0;
  for (int k = 0; k < dim / 2; ++k) {
    const double inv = 1.0 / std::pow(base, 2.0 * k / dim), wavelen = 2 * std::numbers::pi / inv;
    double llama = inv;
    if (wavelen > orig / lo) {
      llama = inv / factor;
    } else if (wavelen >= orig / hi) {
      const double smooth = (orig / wavelen - lo) / (hi - lo);
      llama = (1 - smooth) * inv / factor + smooth * inv;
    }
    EXPECT_NEAR(ff[k], inv / llama, 1e-6 * inv / llama) << "factor " << k;
    n_scaled += ff[k] != 1.0f;
  }
  EXPECT_GT(n_scaled, 4) << "the fixture's context is short: most pairs are scaled";
}

TEST(RopeHParams, EachModelDefinitionSaysItsRopeMode) {
  // GGUF does not record the pairing: Llama's converter permutes wq / wk for NORMAL pairs, Qwen's
  // keeps Transformers' rotate_half (NEOX). A wrong mode here fails the reference checks too, but
  // this names the cause.
  CpuBackend cpu(1);
  int n = 0;
  for (const auto& [file, mode] : {std::pair{"llama-s/llama-s-f16.gguf", ops::RopeMode::NORMAL},
                                   std::pair{"qwen2-s/qwen2-s-f16.gguf", ops::RopeMode::NEOX},
                                   std::pair{"qwen3-xs/qwen3-xs-f16.gguf", ops::RopeMode::NEOX}}) {
    auto f = open_fixture(file);
    if (!f) continue;
    EXPECT_EQ(models::load(f, cpu)->hparams().rope_mode, mode) << file;
    ++n;
  }
  if (n == 0) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
}

}  // namespace
}  // namespace minfer::test
