// make_model: generated models load in minfer (strict GGUF reader, models::load, tokenizer), run a
// forward pass, carry the converter's metadata and the Q4_K_M recipe's dtypes, and copy a real
// vocabulary faithfully.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "quantize/mkmodel.h"
#include "quantize_test_util.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {
namespace {

using quantize::ModelShape;

ModelShape small_shape(const std::string& arch, int32_t n_embd, bool tied) {
  ModelShape s;
  s.name = "test-" + arch;
  s.arch = arch;
  s.n_embd = n_embd;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = arch == "qwen3" ? 64 : 0;
  s.n_ff = 3 * n_embd;
  s.n_vocab = 600;
  s.n_ctx_train = 4096;
  s.tied = tied;
  return s;
}

quantize::MakeModelParams make_params(const ModelShape& s, const char* type = "Q4_K_M") {
  quantize::MakeModelParams p;
  p.shape = s;
  p.target = quantize::parse_target(type);
  p.seed = 1234;
  p.n_threads = 2;
  return p;
}

std::vector<char> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs a few tokens through the model on the CPU; every logit must be finite and they must vary.
void expect_forward_pass_works(const std::shared_ptr<const gguf::File>& file, std::vector<int32_t> tokens) {
  CpuBackend cpu(2);
  auto model = models::load(file, cpu);
  SessionParams sp;
  sp.n_ctx = 64;
  Session s(*model, cpu, sp);
  const auto logits = s.eval(tokens, /*all_logits=*/true);
  ASSERT_EQ(logits.size(), tokens.size() * static_cast<size_t>(model->hparams().n_vocab));
  float lo = INFINITY, hi = -INFINITY;
  for (float x : logits) {
    ASSERT_TRUE(std::isfinite(x));
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_GT(hi - lo, 1e-3f) << "logits do not vary";
}

struct SmallCase {
  const char* arch;
  bool tied;
};

class SmallModel : public ::testing::TestWithParam<SmallCase> {};

TEST_P(SmallModel, LoadsRunsAndFollowsTheQ4KMRecipe) {
  const auto c = GetParam();
  const ModelShape s = small_shape(c.arch, 256, c.tied);
  TempPath out(std::string("mk-") + c.arch);
  const auto sum = quantize::make_model(make_params(s), out.path());
  auto file = std::make_shared<const gguf::File>(out.path());
  const std::string a = c.arch;
  const bool qwen3 = a == "qwen3";

  // Converter metadata.
  EXPECT_EQ(file->get_string("general.architecture"), a);
  EXPECT_EQ(file->get_string("general.type"), "model");
  EXPECT_EQ(file->get_u32(a + ".block_count"), 2u);
  EXPECT_EQ(file->get_u32(a + ".context_length"), 4096u);
  EXPECT_EQ(file->get_u32(a + ".embedding_length"), 256u);
  EXPECT_EQ(file->get_u32(a + ".feed_forward_length"), 768u);
  EXPECT_EQ(file->get_u32(a + ".attention.head_count"), 4u);
  EXPECT_EQ(file->get_u32(a + ".attention.head_count_kv"), 2u);
  EXPECT_EQ(file->get_f32(a + ".rope.freq_base"), 1e6f);
  EXPECT_EQ(file->get_f32(a + ".attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(file->has(a + ".attention.key_length"), qwen3);
  if (qwen3) {
    EXPECT_EQ(file->get_u32(a + ".attention.value_length"), 64u);
  }
  EXPECT_EQ(file->get_u32("general.file_type"), 15u);
  EXPECT_EQ(file->get_u32("general.quantization_version"), 2u);
  EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file->get_string("tokenizer.ggml.pre"), "qwen2");

  // Same keys, order and value types as llama.cpp's converter wrote into the fixture of this arch.
  const auto conv = fixture(qwen3 ? "qwen3-xs/qwen3-xs-f16.gguf" : "qwen2-s/qwen2-s-f16.gguf");
  if (!conv.empty()) {
    const gguf::File ref(conv);
    ASSERT_EQ(file->n_kv(), ref.n_kv());
    for (size_t i = 0; i < ref.n_kv(); ++i) {
      EXPECT_EQ(file->kvs()[i].key(), ref.kvs()[i].key()) << "key " << i;
      EXPECT_EQ(file->kvs()[i].type(), ref.kvs()[i].type()) << ref.kvs()[i].key();
    }
  }

  // Tensor names, shapes and Q4_K_M dtypes, written out independently of the recipe code: with
  // 2 layers use_more_bits picks layer 1 (i >= 7 * 2 / 8), so its attn_v / ffn_down are q6_K.
  std::map<std::string, std::pair<DType, std::vector<int64_t>>> want;
  want["token_embd.weight"] = {c.tied ? DType::Q6_K : DType::Q4_K, {256, 600}};
  want["output_norm.weight"] = {DType::F32, {256}};
  if (!c.tied) want["output.weight"] = {DType::Q6_K, {256, 600}};
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const DType more = i == 1 ? DType::Q6_K : DType::Q4_K;
    want[b + "attn_norm.weight"] = {DType::F32, {256}};
    want[b + "ffn_norm.weight"] = {DType::F32, {256}};
    want[b + "attn_q.weight"] = {DType::Q4_K, {256, 256}};
    want[b + "attn_k.weight"] = {DType::Q4_K, {256, 128}};
    want[b + "attn_v.weight"] = {more, {256, 128}};
    want[b + "attn_output.weight"] = {DType::Q4_K, {256, 256}};
    want[b + "ffn_gate.weight"] = {DType::Q4_K, {256, 768}};
    want[b + "ffn_up.weight"] = {DType::Q4_K, {256, 768}};
    want[b + "ffn_down.weight"] = {more, {768, 256}};
    if (qwen3) {
      want[b + "attn_q_norm.weight"] = {DType::F32, {64}};
      want[b + "attn_k_norm.weight"] = {DType::F32, {64}};
    } else {
      want[b + "attn_q.bias"] = {DType::F32, {256}};
      want[b + "attn_k.bias"] = {DType::F32, {128}};
      want[b + "attn_v.bias"] = {DType::F32, {128}};
    }
  }
  ASSERT_EQ(file->n_tensors(), want.size());
  EXPECT_EQ(sum.n_tensors, want.size());
  for (const auto& t : file->tensors()) {
    auto it = want.find(t.name);
    ASSERT_NE(it, want.end()) << "unexpected tensor " << t.name;
    EXPECT_EQ(dtype_name(t.type), dtype_name(it->second.first)) << t.name;
    EXPECT_EQ(std::vector<int64_t>(t.ne, t.ne + t.n_dims), it->second.second) << t.name;
    for (float x : dequantize_tensor(t)) ASSERT_TRUE(std::isfinite(x)) << t.name;
  }
  EXPECT_EQ(file->tensors().front().name, "token_embd.weight") << "converter order";

  const HParams hp = HParams::from_gguf(*file, ops::RopeMode::NEOX);
  EXPECT_EQ(hp.head_dim, 64);
  EXPECT_EQ(hp.n_vocab, 600);

  // The synthetic vocabulary.
  const auto tok = tokenizer::Tokenizer::from_gguf(*file);
  EXPECT_EQ(tok.n_vocab(), 600);
  const auto ids = tok.encode("Hello world", false);
  ASSERT_FALSE(ids.empty());
  EXPECT_LT(ids.size(), std::string("Hello world").size()) << "merges apply";
  EXPECT_EQ(tok.decode(ids), "Hello world");
  const auto chat = tok.encode("<|im_start|>user\nhi<|im_end|>", /*parse_special=*/true);
  EXPECT_EQ(chat.front(), 598);
  EXPECT_EQ(chat.back(), 599);
  EXPECT_EQ(tok.eos_id(), 599);
  EXPECT_EQ(tok.bos_id(), 597);

  expect_forward_pass_works(file, ids);
}

INSTANTIATE_TEST_SUITE_P(Archs, SmallModel,
                         ::testing::Values(SmallCase{"qwen2", true}, SmallCase{"qwen3", false}),
                         [](const auto& info) { return std::string(info.param.arch) + (info.param.tied ? "_tied" : "_untied"); });

TEST(MkModel, NarrowRowsFallBackAndStillRun) {
  // n_embd 64: no K-quant fits, so Q4_K_M writes q5_0 (q4_K's fallback) and q8_0 (q6_K's).
  const ModelShape s = small_shape("qwen2", 64, true);
  TempPath out("mk-narrow");
  const auto sum = quantize::make_model(make_params(s), out.path());
  auto file = std::make_shared<const gguf::File>(out.path());
  EXPECT_EQ(file->tensor("token_embd.weight").type, DType::Q8_0);
  EXPECT_EQ(file->tensor("blk.0.attn_q.weight").type, DType::Q5_0);
  EXPECT_EQ(file->tensor("blk.1.attn_v.weight").type, DType::Q8_0);
  EXPECT_EQ(file->tensor("blk.0.ffn_down.weight").type, DType::Q5_0);  // row 192: not 256
  EXPECT_EQ(sum.n_fallback, 2 * 7);
  expect_forward_pass_works(file, {1, 2, 3, 4});
}

TEST(MkModel, LlamaWritesItsKeysAndTheLlama3FrequencyFactors) {
  // llama-s's config (fixtures README): rope_theta 5e5, head_dim 64, llama3 factor 8, low 1,
  // high 4, original context 256.
  ModelShape s = small_shape("llama", 256, false);
  s.rope_freq_base = 500000.0f;
  s.llama3_factor = 8.0f;
  s.llama3_n_ctx_orig = 256;
  TempPath out("mk-llama");
  quantize::make_model(make_params(s), out.path());
  auto file = std::make_shared<const gguf::File>(out.path());
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_u32("llama.vocab_size"), 600u);
  EXPECT_EQ(file->get_u32("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(file->tensors().front().name, "rope_freqs.weight") << "converter order";
  EXPECT_EQ(file->find_tensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ(file->find_tensor("blk.0.attn_q_norm.weight"), nullptr);
  EXPECT_EQ(file->tensor("blk.0.attn_q.weight").type, DType::Q4_K);
  const gguf::TensorInfo& t = file->tensor("rope_freqs.weight");
  ASSERT_EQ(t.type, DType::F32);
  ASSERT_EQ(t.ne[0], 32);
  const float* ff = reinterpret_cast<const float*>(t.data);
  // Transformers' _compute_llama3_parameters gives the scaled inverse frequencies; the factor is
  // the plain one over it (written here from the HF formula, not from shapes.cpp's).
  for (int k = 0; k < 32; ++k) {
    const double inv = std::pow(500000.0, -2.0 * k / 64), wavelen = 2 * 3.141592653589793 / inv;
    double scaled = inv;
    if (wavelen > 256.0 / 1.0) scaled = inv / 8;
    else if (wavelen >= 256.0 / 4.0) {
      const double smooth = (256.0 / wavelen - 1) / (4 - 1);
      scaled = (1 - smooth) * inv / 8 + smooth * inv;
    }
    EXPECT_NEAR(ff[k], inv / scaled, 1e-6 * inv / scaled) << "factor " << k;
  }
  // The same factors as the fixture's file, whose factors were made from its HF config.
  if (const auto fx = fixture("llama-s/llama-s-f16.gguf"); !fx.empty()) {
    const gguf::File ref(fx);
    const float* rf = reinterpret_cast<const float*>(ref.tensor("rope_freqs.weight").data);
    for (int k = 0; k < 32; ++k) EXPECT_NEAR(ff[k], rf[k], 1e-6 * rf[k]) << "fixture factor " << k;
  }
  expect_forward_pass_works(file, {1, 2, 3, 4});
}

TEST(MkModel, FloatFilesTakeAnyRowLength) {
  // Float files have no quantization blocks: n_embd 16 is fine in f32 and f16, refused for Q4_K_M.
  ModelShape s = small_shape("qwen3", 16, false);
  s.n_head = 2;
  s.n_head_kv = 1;
  s.head_dim = 8;
  s.n_ff = 40;
  for (const char* type : {"F32", "f16"}) {
    TempPath out(std::string("mk-float-") + type);
    quantize::make_model(make_params(s, type), out.path());
    auto file = std::make_shared<const gguf::File>(out.path());
    EXPECT_EQ(file->tensor("blk.0.ffn_down.weight").ne[0], 40);
    expect_forward_pass_works(file, {1, 2, 3});
  }
  TempPath out("mk-float-q");
  EXPECT_THROW(quantize::make_model(make_params(s, "Q4_K_M"), out.path()), std::invalid_argument);
}

TEST(MkModel, SameBytesForAnyThreadCountAndSeedMatters) {
  const ModelShape s = small_shape("qwen3", 256, false);
  TempPath a("mk-t1"), b("mk-t3"), c("mk-seed");
  auto p = make_params(s);
  p.n_threads = 1;
  quantize::make_model(p, a.path());
  p.n_threads = 3;
  quantize::make_model(p, b.path());
  p.seed += 1;
  quantize::make_model(p, c.path());
  const auto ba = read_all(a.path()), bb = read_all(b.path()), bc = read_all(c.path());
  EXPECT_TRUE(ba == bb) << "thread count changed the output";
  ASSERT_EQ(ba.size(), bc.size());
  EXPECT_FALSE(ba == bc) << "seed ignored";
}

TEST(MkModel, WeightStatistics) {
  ModelShape s = small_shape("qwen2", 512, true);
  TempPath out("mk-f32");
  quantize::make_model(make_params(s, "F32"), out.path());
  const gguf::File f(out.path());
  for (const auto& t : f.tensors()) ASSERT_EQ(t.type, DType::F32) << t.name;
  const auto w = dequantize_tensor(f.tensor("blk.0.ffn_up.weight"));  // 512 x 1536
  double sum = 0, sq = 0, maxabs = 0;
  for (float x : w) {
    sum += x;
    sq += static_cast<double>(x) * x;
    maxabs = std::max(maxabs, static_cast<double>(std::fabs(x)));
  }
  const double n = static_cast<double>(w.size());
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 3 * 0.02 / std::sqrt(n) * 2);
  EXPECT_NEAR(sd, 0.02, 0.0002);
  EXPECT_LE(maxabs, 0.02 * 3.47);
  EXPECT_GT(maxabs, 0.02 * 2.5) << "tails missing";
  for (float x : dequantize_tensor(f.tensor("blk.1.attn_norm.weight"))) ASSERT_EQ(x, 1.0f);
  const auto bias = dequantize_tensor(f.tensor("blk.0.attn_q.bias"));
  double bsq = 0;
  for (float x : bias) bsq += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(bsq / static_cast<double>(bias.size())), 0.02, 0.004);
  // Different rows and tensors are different streams.
  const auto up1 = dequantize_tensor(f.tensor("blk.1.ffn_up.weight"));
  EXPECT_NE(std::vector<float>(w.begin(), w.begin() + 512), std::vector<float>(w.begin() + 512, w.begin() + 1024));
  EXPECT_NE(std::vector<float>(w.begin(), w.begin() + 512), std::vector<float>(up1.begin(), up1.begin() + 512));
}

TEST(MkModel, CopiesTheRealQwenVocabPadded) {
  const auto vocab_path = fixture("tokenizer/qwen-vocab.gguf");
  if (vocab_path.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  ModelShape s = small_shape("qwen2", 64, true);
  s.n_layer = 1;
  s.n_vocab = 152064;  // Qwen2.5-7B's embedding rows: 128 more than the 151936 tokens
  auto p = make_params(s, "Q8_0");
  p.vocab = vocab_path;
  TempPath out("mk-vocab");
  quantize::make_model(p, out.path());
  auto file = std::make_shared<const gguf::File>(out.path());
  const gguf::File src(vocab_path);

  const auto toks = file->get_string_array("tokenizer.ggml.tokens");
  const auto src_toks = src.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(src_toks.size(), 151936u);
  ASSERT_EQ(toks.size(), 152064u);
  EXPECT_TRUE(std::equal(src_toks.begin(), src_toks.end(), toks.begin()));
  EXPECT_EQ(toks[151936], "[PAD151936]");
  EXPECT_EQ(toks[152063], "[PAD152063]");
  const auto types = file->get_array<int32_t>("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 152064u);
  EXPECT_EQ(types[152000], 5);  // UNUSED
  // Every other tokenizer key is a verbatim copy.
  for (const auto& v : src.kvs()) {
    const std::string k(v.key());
    if (!k.starts_with("tokenizer.") || k == "tokenizer.ggml.tokens" || k == "tokenizer.ggml.token_type") continue;
    const gguf::Value* w = file->find(k);
    ASSERT_NE(w, nullptr) << k;
    EXPECT_EQ(w->type(), v.type()) << k;
    EXPECT_TRUE(std::equal(v.raw().begin(), v.raw().end(), w->raw().begin(), w->raw().end())) << k;
  }
  EXPECT_EQ(file->get_string("general.architecture"), "qwen2") << "general.* is the model's, not the vocab file's";
  EXPECT_FALSE(file->has("general.alignment") && !src.has("general.alignment"));

  const auto ours = tokenizer::Tokenizer::from_gguf(*file);
  const auto theirs = tokenizer::Tokenizer::from_gguf(src);
  const auto ids = ours.encode("Hello world", false);
  EXPECT_EQ(ids, theirs.encode("Hello world", false));
  EXPECT_EQ(ids, (std::vector<int32_t>{9707, 1879}));  // Hugging Face ids (fixtures qwen_tokenizer_cases.json)
  EXPECT_EQ(ours.n_vocab(), 152064);
  EXPECT_EQ(ours.eos_id(), theirs.eos_id());
  EXPECT_EQ(file->tensor("token_embd.weight").ne[1], 152064);
  expect_forward_pass_works(file, ids);

  s.n_vocab = 151935;  // one row short
  p.shape = s;
  TempPath bad("mk-vocab-bad");
  EXPECT_THROW(quantize::make_model(p, bad.path()), std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(bad.path()));
}

TEST(MkModel, NamedShapesMatchTheHuggingFaceModels) {
  // Parameter counts Hugging Face reports for the safetensors checkpoints.
  const std::pair<const char*, int64_t> counts[] = {{"qwen2.5-0.5b", 494032768},
                                                    {"qwen2.5-7b", 7615616512},
                                                    {"qwen2.5-14b", 14770033664},
                                                    {"qwen3-0.6b", 596049920},
                                                    {"qwen3-8b", 8190735360},
                                                    {"llama3.1-8b", 8030261248},
                                                    // by hand from Qwen3-30B-A3B's config.json (HF: 30.5B)
                                                    {"qwen3-30b-a3b", 30532122624}};
  for (const auto& [name, n] : counts) {
    const auto& s = quantize::find_shape(name);
    EXPECT_NO_THROW(s.validate()) << name;
    EXPECT_EQ(s.n_params(), n) << name;
  }
  const auto& q7 = quantize::find_shape("Qwen2.5-7B");
  EXPECT_EQ(q7.n_vocab, 152064);
  EXPECT_FALSE(q7.tied);
  EXPECT_EQ(quantize::find_shape("qwen3-0.6b").head_dim_or_default(), 128);
  const auto& l8 = quantize::find_shape("llama3.1-8b");
  EXPECT_EQ(l8.arch, "llama");
  EXPECT_EQ(l8.head_dim_or_default(), 128);
  EXPECT_EQ(l8.n_vocab, 128256);
  EXPECT_FALSE(l8.tied);
  EXPECT_EQ(l8.rope_freq_base, 500000.0f);
  EXPECT_EQ(l8.llama3_factor, 8.0f);
  EXPECT_EQ(l8.llama3_n_ctx_orig, 8192);
  EXPECT_EQ(quantize::size_label(494032768), "494M");
  EXPECT_EQ(quantize::size_label(7615616512), "7.6B");
  EXPECT_EQ(quantize::size_label(5200000), "5.2M");
  EXPECT_THROW(quantize::find_shape("qwen9-1b"), std::invalid_argument);
}

// Qwen3-MoE: converter metadata (expert keys), 3-D expert tensors, the router left f32, and
// llama.cpp's Q4_K_M rules for 8 experts (attn_v and attn_k q8_0, as in fixtures/qwen3moe-s).
TEST(MkModel, Qwen3MoeLoadsRunsAndQuantizesExpertsLikeLlamaCpp) {
  ModelShape s = small_shape("qwen3", 256, false);
  s.arch = "qwen3moe";
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_ff_exp = 256;
  TempPath out("mk-qwen3moe");
  quantize::make_model(make_params(s), out.path());
  auto file = std::make_shared<const gguf::File>(out.path());
  EXPECT_EQ(file->get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(file->get_u32("qwen3moe.expert_count"), 8u);
  EXPECT_EQ(file->get_u32("qwen3moe.expert_used_count"), 2u);
  EXPECT_EQ(file->get_u32("qwen3moe.expert_feed_forward_length"), 256u);
  const auto& gate = file->tensor("blk.0.ffn_gate_exps.weight");
  EXPECT_EQ(gate.ne[0], 256);
  EXPECT_EQ(gate.ne[1], 256);
  EXPECT_EQ(gate.ne[2], 8);
  EXPECT_EQ(gate.type, DType::Q4_K);
  EXPECT_EQ(file->tensor("blk.1.ffn_down_exps.weight").ne[0], 256);
  EXPECT_EQ(file->tensor("blk.0.ffn_gate_inp.weight").type, DType::F32);
  EXPECT_EQ(file->tensor("blk.0.attn_v.weight").type, DType::Q8_0);
  EXPECT_EQ(file->tensor("blk.0.attn_k.weight").type, DType::Q8_0);
  EXPECT_EQ(file->find_tensor("blk.0.ffn_gate.weight"), nullptr);
  expect_forward_pass_works(file, {1, 2, 3, 4, 5});
  s.n_expert_used = 9;
  EXPECT_THROW(s.validate(), std::invalid_argument);
}

TEST(MkModel, BadShapesAreRejected) {
  auto expect_bad = [](ModelShape s, const char* what) {
    try {
      s.validate();
      ADD_FAILURE() << "accepted: " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  ModelShape s = small_shape("qwen2", 256, true);
  s.arch = "falcon";
  expect_bad(s, "arch");
  s = small_shape("qwen2", 256, true);
  s.llama3_factor = 8;  // llama3 rope scaling on a qwen2
  expect_bad(s, "llama3");
  s = small_shape("llama", 256, true);
  s.llama3_factor = 8;
  s.llama3_high_freq = 0.5f;  // high below low
  expect_bad(s, "llama3");
  s = small_shape("qwen2", 256, true);
  s.n_head_kv = 3;
  expect_bad(s, "n_head_kv");
  s = small_shape("qwen2", 256, true);
  s.n_embd = 250;
  expect_bad(s, "n_embd");
  s = small_shape("qwen2", 256, true);
  s.n_layer = 0;
  expect_bad(s, "n_layer");
  s = small_shape("qwen2", 256, true);
  s.n_vocab = 100;  // synthetic vocab needs 259
  TempPath out("mk-small-vocab");
  EXPECT_THROW(quantize::make_model(make_params(s), out.path()), std::invalid_argument);
}

}  // namespace
}  // namespace minfer::test
