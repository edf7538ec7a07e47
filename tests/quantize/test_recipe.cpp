// The mix recipe against llama-quantize's choices in the fixture files (an independent tool), and
// its rules on synthetic tensor lists checked with formulas written out here.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "quantize/quantize_file.h"
#include "quantize/recipe.h"

namespace minfer::test {
namespace {

using quantize::parse_target;
using quantize::TensorDesc;

struct RecipeCase {
  const char* f16;
  const char* type;
  const char* llama_file;
};

void PrintTo(const RecipeCase& c, std::ostream* os) { *os << c.f16 << " -> " << c.type; }

class RecipeVsLlama : public ::testing::TestWithParam<RecipeCase> {};

TEST_P(RecipeVsLlama, SameDtypePerTensor) {
  const RecipeCase c = GetParam();
  const auto in_path = fixture(c.f16), ref_path = fixture(c.llama_file);
  if (in_path.empty() || ref_path.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const gguf::File in(in_path), ref(ref_path);
  const auto plan = quantize::plan_file(in, parse_target(c.type));
  ASSERT_EQ(plan.size(), in.n_tensors());
  ASSERT_EQ(in.n_tensors(), ref.n_tensors());
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& t = in.tensors()[i];
    const gguf::TensorInfo* r = ref.find_tensor(t.name);
    ASSERT_NE(r, nullptr) << t.name << " missing in " << c.llama_file;
    EXPECT_EQ(dtype_name(plan[i].type), dtype_name(r->type)) << t.name;
  }
  EXPECT_EQ(ref.get_u32("general.file_type"), static_cast<uint32_t>(parse_target(c.type).ftype));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecipeVsLlama,
                         ::testing::Values(RecipeCase{"qwen2-s/qwen2-s-f16.gguf", "Q4_K_M", "qwen2-s/qwen2-s-Q4_K_M.gguf"},
                                           RecipeCase{"qwen2-s/qwen2-s-f16.gguf", "Q5_K_M", "qwen2-s/qwen2-s-Q5_K_M.gguf"},
                                           RecipeCase{"qwen3-xs/qwen3-xs-f16.gguf", "Q8_0", "qwen3-xs/qwen3-xs-Q8_0.gguf"},
                                           RecipeCase{"qwen3-xs/qwen3-xs-f16.gguf", "Q4_0", "qwen3-xs/qwen3-xs-Q4_0.gguf"},
                                           RecipeCase{"qwen3-xs/qwen3-xs-f16.gguf", "Q5_1", "qwen3-xs/qwen3-xs-Q5_1.gguf"}),
                         [](const auto& info) { return std::string(info.param.type); });

// qwen3-s has no f16 file, but the recipe only reads names and shapes: treat its weights as f16
// and the plan must be the dtypes llama-quantize wrote (5 layers, ffn 640: q5_0/q8_0 fallbacks).
TEST(RecipeVsLlama, Qwen3SQ4KMWithFallbacks) {
  const auto p = fixture("qwen3-s/qwen3-s-Q4_K_M.gguf");
  if (p.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const gguf::File f(p);
  auto descs = quantize::tensor_descs(f);
  for (auto& d : descs)
    if (dtype_is_quantized(d.type)) d.type = DType::F16;
  const auto plan = quantize::plan_types(parse_target("Q4_K_M"), quantize::ModelInfo::from_gguf(f), descs);
  int fallbacks = 0;
  for (size_t i = 0; i < descs.size(); ++i) {
    EXPECT_EQ(dtype_name(plan[i].type), dtype_name(f.tensors()[i].type)) << descs[i].name;
    fallbacks += plan[i].fallback;
  }
  EXPECT_EQ(fallbacks, 5);  // the five ffn_down tensors (row length 640)
}

// A llama-style tensor list: token_embd, (output), and per layer the usual weights and norms.
std::vector<TensorDesc> layer_list(int n_layer, int64_t n_embd, int64_t n_ff, bool tied) {
  std::vector<TensorDesc> v;
  auto add = [&](std::string name, int64_t ne0, int64_t ne1) {
    TensorDesc d;
    d.name = std::move(name);
    d.type = ne1 > 1 ? DType::F16 : DType::F32;
    d.ne[0] = ne0;
    d.ne[1] = ne1;
    v.push_back(d);
  };
  add("token_embd.weight", n_embd, 1000);
  for (int i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", n_embd, 1);
    add(b + "attn_q.weight", n_embd, n_embd);
    add(b + "attn_q.bias", n_embd, 1);
    add(b + "attn_k.weight", n_embd, n_embd / 4);
    add(b + "attn_v.weight", n_embd, n_embd / 4);
    add(b + "attn_output.weight", n_embd, n_embd);
    add(b + "ffn_norm.weight", n_embd, 1);
    add(b + "ffn_gate.weight", n_embd, n_ff);
    add(b + "ffn_up.weight", n_embd, n_ff);
    add(b + "ffn_down.weight", n_ff, n_embd);
  }
  add("output_norm.weight", n_embd, 1);
  if (!tied) add("output.weight", n_embd, 1000);
  return v;
}

std::map<std::string, DType> plan_map(const std::string& type, const std::vector<TensorDesc>& v, int n_layer,
                                      int n_head = 8, int n_head_kv = 2) {
  quantize::ModelInfo m;
  m.arch = "qwen2";
  m.n_layer = n_layer;
  m.n_head = n_head;
  m.n_head_kv = n_head_kv;
  const auto plan = quantize::plan_types(parse_target(type), m, v);
  std::map<std::string, DType> out;
  for (size_t i = 0; i < v.size(); ++i) out[v[i].name] = plan[i].type;
  return out;
}

TEST(Recipe, Q4KMUsesMoreBitsOnTheDocumentedLayers) {
  for (int n : {1, 2, 7, 24, 28, 36, 48}) {
    const auto v = layer_list(n, 512, 1024, false);
    const auto p = plan_map("Q4_K_M", v, n);
    for (int i = 0; i < n; ++i) {
      // The rule as the task and llama.cpp state it.
      const bool more = i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
      const std::string b = "blk." + std::to_string(i) + ".";
      const DType want = more ? DType::Q6_K : DType::Q4_K;
      EXPECT_EQ(p.at(b + "attn_v.weight"), want) << n << " layers, layer " << i;
      EXPECT_EQ(p.at(b + "ffn_down.weight"), want) << n << " layers, layer " << i;
      EXPECT_EQ(p.at(b + "attn_q.weight"), DType::Q4_K);
      EXPECT_EQ(p.at(b + "ffn_up.weight"), DType::Q4_K);
      EXPECT_EQ(p.at(b + "attn_norm.weight"), DType::F32);
      EXPECT_EQ(p.at(b + "attn_q.bias"), DType::F32);
    }
    EXPECT_EQ(p.at("output.weight"), DType::Q6_K);
    EXPECT_EQ(p.at("token_embd.weight"), DType::Q4_K);  // untied: the default type
  }
}

TEST(Recipe, TiedEmbeddingTakesTheOutputRule) {
  const auto v = layer_list(4, 512, 1024, true);
  EXPECT_EQ(plan_map("Q4_K_M", v, 4).at("token_embd.weight"), DType::Q6_K);
  EXPECT_EQ(plan_map("Q8_0", v, 4).at("token_embd.weight"), DType::Q8_0);
  EXPECT_EQ(plan_map("Q4_0", v, 4).at("token_embd.weight"), DType::Q6_K);
  EXPECT_EQ(plan_map("q4_0", v, 4).at("token_embd.weight"), DType::Q4_0);  // pure
  const auto u = layer_list(4, 512, 1024, false);
  EXPECT_EQ(plan_map("Q4_0", u, 4).at("token_embd.weight"), DType::Q4_0);
  EXPECT_EQ(plan_map("Q4_0", u, 4).at("output.weight"), DType::Q6_K);
}

TEST(Recipe, OtherKMixes) {
  const int n = 16;
  const auto v = layer_list(n, 512, 1024, false);
  const auto s = plan_map("Q4_K_S", v, n);
  const auto q3m = plan_map("Q3_K_M", v, n);
  const auto q3l = plan_map("Q3_K_L", v, n);
  const auto q2 = plan_map("Q2_K", v, n, 8, 2);
  const auto q2g = plan_map("Q2_K", v, n, 8, 4);
  for (int i = 0; i < n; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(s.at(b + "attn_v.weight"), i < 4 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(s.at(b + "ffn_down.weight"), i < n / 8 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(q3m.at(b + "attn_v.weight"), i < 2 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(q3m.at(b + "ffn_down.weight"), i < n / 16 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(q3m.at(b + "attn_output.weight"), DType::Q4_K);
    EXPECT_EQ(q3m.at(b + "attn_q.weight"), DType::Q3_K);
    EXPECT_EQ(q3l.at(b + "attn_v.weight"), DType::Q5_K);
    EXPECT_EQ(q3l.at(b + "ffn_down.weight"), DType::Q5_K);
    EXPECT_EQ(q3l.at(b + "attn_output.weight"), DType::Q5_K);
    EXPECT_EQ(q2.at(b + "attn_v.weight"), DType::Q4_K);   // n_gqa 4
    EXPECT_EQ(q2g.at(b + "attn_v.weight"), DType::Q3_K);  // n_gqa 2
    EXPECT_EQ(q2.at(b + "ffn_down.weight"), DType::Q3_K);
    EXPECT_EQ(q2.at(b + "attn_output.weight"), DType::Q3_K);
    EXPECT_EQ(q2.at(b + "ffn_gate.weight"), DType::Q2_K);
  }
}

TEST(Recipe, FusedQkvFollowsTheAttnVRule) {
  auto v = layer_list(8, 512, 1024, false);
  for (auto& d : v) {
    const auto pos = d.name.find("attn_v.weight");
    if (pos != std::string::npos) d.name.replace(pos, 6, "attn_qkv");
  }
  const auto p = plan_map("Q4_K_M", v, 8);
  for (int i = 0; i < 8; ++i) {
    const bool more = i < 1 || i >= 7 || (i - 1) % 3 == 2;
    EXPECT_EQ(p.at("blk." + std::to_string(i) + ".attn_qkv.weight"), more ? DType::Q6_K : DType::Q4_K) << i;
  }
}

TEST(Recipe, FallbacksForRowLengths) {
  // 640 = 20 * 32, not a multiple of 256.
  std::vector<TensorDesc> v(1);
  v[0].name = "blk.0.ffn_up.weight";
  v[0].type = DType::F16;
  v[0].ne[0] = 640;
  v[0].ne[1] = 64;
  quantize::ModelInfo m;
  m.arch = "qwen2";
  m.n_layer = 1;
  const std::pair<const char*, DType> cases[] = {{"q2_K", DType::Q4_0}, {"q3_K", DType::Q4_0}, {"q4_K", DType::Q5_0},
                                                 {"q5_K", DType::Q5_1}, {"q6_K", DType::Q8_0}, {"q8_0", DType::Q8_0},
                                                 {"Q4_K_M", DType::Q5_0}, {"f16", DType::F16}};
  for (const auto& [type, want] : cases) {
    const auto p = quantize::plan_types(parse_target(type), m, v);
    EXPECT_EQ(p[0].type, want) << type;
    EXPECT_EQ(p[0].fallback, std::string(type) != "q8_0" && std::string(type) != "f16") << type;
  }
  v[0].ne[0] = 48;  // not even a multiple of 32
  EXPECT_EQ(quantize::plan_types(parse_target("q4_K"), m, v)[0].type, DType::F16);
  EXPECT_THROW(quantize::plan_types(parse_target("q4_0"), m, v), std::invalid_argument);
}

TEST(Recipe, WhatStaysUnquantized) {
  auto desc = [](const char* name, int64_t ne0, int64_t ne1, DType t = DType::F16) {
    TensorDesc d;
    d.name = name;
    d.type = t;
    d.ne[0] = ne0;
    d.ne[1] = ne1;
    return d;
  };
  EXPECT_FALSE(quantize::allows_quantization(desc("blk.0.attn_norm.weight", 256, 1)));
  EXPECT_FALSE(quantize::allows_quantization(desc("blk.0.attn_q_norm.weight", 256, 4)));  // 2-D norm
  EXPECT_FALSE(quantize::allows_quantization(desc("blk.0.attn_q.bias", 256, 2)));
  EXPECT_FALSE(quantize::allows_quantization(desc("blk.0.ffn_gate_inp.weight", 256, 8)));
  EXPECT_FALSE(quantize::allows_quantization(desc("position_embd.weight", 256, 8)));
  EXPECT_FALSE(quantize::allows_quantization(desc("blk.0.attn_q.weight", 256, 1)));  // ggml_n_dims == 1
  EXPECT_TRUE(quantize::allows_quantization(desc("blk.0.attn_q.weight", 256, 2)));
  EXPECT_TRUE(quantize::allows_quantization(desc("output.weight", 256, 100)));
}

TEST(Recipe, LlamaTensorOrder) {
  std::vector<std::string> v = {"blk.10.attn_q.weight", "token_embd.weight", "blk.2.ffn_up.weight", "output.weight",
                                "blk.2.attn_k.weight", "output_norm.weight"};
  std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return quantize::llama_tensor_less(a, b); });
  const std::vector<std::string> want = {"output.weight", "output_norm.weight", "token_embd.weight",
                                         "blk.2.attn_k.weight", "blk.2.ffn_up.weight", "blk.10.attn_q.weight"};
  EXPECT_EQ(v, want);
}

TEST(Targets, ParseNames) {
  using F = quantize::FileType;
  auto t = parse_target("Q4_K_M");
  EXPECT_EQ(t.ftype, F::MOSTLY_Q4_K_M);
  EXPECT_FALSE(t.pure);
  EXPECT_EQ(parse_target("q4_k_m").ftype, F::MOSTLY_Q4_K_M);
  EXPECT_EQ(parse_target("Q4_K").ftype, F::MOSTLY_Q4_K_M);
  EXPECT_EQ(parse_target("Q5_K").ftype, F::MOSTLY_Q5_K_M);
  t = parse_target("q8_0");
  EXPECT_TRUE(t.pure);
  EXPECT_EQ(t.ftype, F::MOSTLY_Q8_0);
  EXPECT_FALSE(parse_target("Q8_0").pure);
  t = parse_target("q4_K");
  EXPECT_TRUE(t.pure);
  EXPECT_EQ(t.ftype, F::MOSTLY_Q4_K_S);
  EXPECT_EQ(quantize::file_type_default_dtype(t.ftype), DType::Q4_K);
  EXPECT_EQ(parse_target("BF16").ftype, F::MOSTLY_BF16);
  EXPECT_EQ(static_cast<uint32_t>(parse_target("Q6_K").ftype), 18u);
  EXPECT_EQ(static_cast<uint32_t>(parse_target("Q5_0").ftype), 8u);
  // llama-quantize's file type numbers.
  EXPECT_EQ(parse_target("15").ftype, F::MOSTLY_Q4_K_M);
  EXPECT_FALSE(parse_target("15").pure);
  EXPECT_EQ(parse_target("7").ftype, F::MOSTLY_Q8_0);
  EXPECT_EQ(parse_target("1").ftype, F::MOSTLY_F16);
  EXPECT_THROW(parse_target("99"), std::invalid_argument);
  EXPECT_THROW(parse_target("4"), std::invalid_argument);  // a retired llama.cpp type
  try {
    parse_target("IQ2_XS");
    FAIL() << "IQ2_XS accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not available"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_target("Q2_K_S"), std::invalid_argument);
  try {
    parse_target("Q9_X");
    FAIL() << "Q9_X accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K_M"), std::string::npos) << "lists the accepted names: " << e.what();
  }
}

}  // namespace
}  // namespace minfer::test
