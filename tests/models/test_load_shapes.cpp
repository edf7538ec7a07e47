// Loading checks every tensor against the hyper-parameters, as llama.cpp's check_tensor_dims
// does: random-weight models (quantize::make_model) rewritten with one tensor of a wrong shape,
// or with hyper-parameters that contradict the tensors, are refused with a message naming the
// tensor, the shape the hyper-parameters give it and the one the file has, for every kind of
// tensor (norms, q/k/v and their biases, q/k norms, the FFN, MoE experts and router, the
// embedding, the untied output, Llama 3's rope_freqs), quantized files and tensor-parallel
// ranks (checked on the whole tensor, before the split) included; a tensor the model does not
// use is refused too. The unmodified files load.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "quantize/mkmodel.h"
#include "runtime/weights.h"
#include "tensor/collective.h"

namespace minfer::test {
namespace {

// n_embd 256 (a K-quant block per row), 4 heads / 2 KV heads of 64, n_ff 512, 2 layers.
std::shared_ptr<const gguf::File> small_model(const std::string& arch, const char* type = "F16", bool tied = false) {
  quantize::MakeModelParams mp;
  mp.shape.name = "shape-test";
  mp.shape.arch = arch;
  mp.shape.n_embd = 256;
  mp.shape.n_layer = 2;
  mp.shape.n_head = 4;
  mp.shape.n_head_kv = 2;
  mp.shape.head_dim = 64;
  mp.shape.n_ff = 512;
  mp.shape.n_vocab = 300;
  mp.shape.n_ctx_train = 1024;
  mp.shape.tied = tied;
  if (arch == "llama") mp.shape.llama3_factor = 8.0f;  // writes rope_freqs.weight [head_dim / 2]
  if (arch == "qwen3moe") {
    mp.shape.n_expert = 4;
    mp.shape.n_expert_used = 2;
    mp.shape.n_ff_exp = 128;
  }
  mp.target = quantize::parse_target(type);
  mp.seed = 7;
  mp.n_threads = 2;
  return make_random_model(mp);
}

// What rewrite() changes: tensor `name` gets shape `ne` (zero bytes of its dtype; absent in the
// source: a new f32 tensor), and `keys` edits the metadata.
struct Edit {
  std::string name;
  std::vector<int64_t> ne;
  std::function<void(gguf::Writer&)> keys;
};

// A copy of `src` with `e` applied.
std::shared_ptr<const gguf::File> rewrite(const gguf::File& src, const Edit& e) {
  gguf::Writer w;
  w.copy_kvs(src);
  if (e.keys) e.keys(w);
  std::vector<uint8_t> zeros;
  bool added = false;
  auto add_edited = [&](DType type) {
    int64_t n = 1;
    for (int64_t d : e.ne) n *= d;
    zeros.assign(dtype_nbytes(type, n), 0);
    w.add_tensor(e.name, type, e.ne, zeros.data());
    added = true;
  };
  for (const gguf::TensorInfo& t : src.tensors()) {
    if (t.name == e.name) {
      add_edited(t.type);
    } else {
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    }
  }
  if (!e.name.empty() && !added) add_edited(DType::F32);
  const auto path = std::filesystem::temp_directory_path() / fmt::format("minfer-shapes-edit-{}.gguf", ::getpid());
  w.write(path);
  auto file = std::make_shared<const gguf::File>(path);
  std::filesystem::remove(path);
  return file;
}

// The message models::load throws for `file` on the CPU, "" when it loads.
std::string load_error(const std::shared_ptr<const gguf::File>& file) {
  CpuBackend cpu(1);
  return error_of([&] { models::load(file, cpu); });
}

// Expects the load of `file` to fail with a message that has every one of `says`.
void expect_refused(const std::shared_ptr<const gguf::File>& file, const std::vector<std::string>& says,
                    const std::string& what) {
  const std::string err = load_error(file);
  ASSERT_FALSE(err.empty()) << what << ": loaded";
  for (const std::string& s : says) EXPECT_NE(err.find(s), std::string::npos) << what << ": '" << s << "' not in: " << err;
}

TEST(LoadShapes, TheGeneratedFilesLoad) {
  for (const char* arch : {"qwen2", "qwen3", "llama", "qwen3moe"})
    EXPECT_EQ(load_error(small_model(arch)), "") << arch;
  EXPECT_EQ(load_error(small_model("qwen2", "F16", /*tied=*/true)), "") << "tied";
  EXPECT_EQ(load_error(small_model("llama", "Q4_K_M")), "") << "Q4_K_M: GGUF's ne[] count elements, not bytes";
}

TEST(LoadShapes, ABadTensorIsRefusedNamingItAndBothShapes) {
  // The new-user report: attn_output [256, 1] loaded and broadcast into wrong output.
  struct Case {
    const char* arch;
    const char* tensor;
    std::vector<int64_t> bad;
    const char* expected;  // what n_embd 256, 4 x 64 q heads, 2 x 64 KV heads, n_ff 512 give it
  };
  const Case cases[] = {
      {"qwen2", "blk.0.attn_output.weight", {256, 1}, "[256, 256]"},
      {"qwen2", "blk.1.attn_q.weight", {256, 192}, "[256, 256]"},
      {"qwen2", "blk.0.attn_k.weight", {256, 256}, "[256, 128]"},
      {"qwen2", "blk.0.attn_v.weight", {128, 128}, "[256, 128]"},
      {"qwen2", "blk.0.attn_v.bias", {256}, "[128]"},
      {"qwen2", "blk.1.attn_norm.weight", {128}, "[256]"},
      {"qwen2", "blk.0.ffn_norm.weight", {256, 2}, "[256, 1]"},
      {"qwen2", "blk.0.ffn_gate.weight", {256, 256}, "[256, 512]"},
      {"qwen2", "blk.0.ffn_up.weight", {512, 256}, "[256, 512]"},
      {"qwen2", "blk.0.ffn_down.weight", {256, 512}, "[512, 256]"},
      {"qwen2", "output_norm.weight", {300}, "[256]"},
      {"qwen2", "output.weight", {256, 299}, "[256, 300]"},
      {"qwen3", "blk.0.attn_q_norm.weight", {32}, "[64]"},
      {"qwen3", "blk.1.attn_k_norm.weight", {64, 2}, "[64, 1]"},
      {"llama", "rope_freqs.weight", {64}, "[32]"},
      {"qwen3moe", "blk.0.ffn_gate_exps.weight", {256, 128, 3}, "[256, 128, 4]"},
      {"qwen3moe", "blk.1.ffn_down_exps.weight", {256, 128, 4}, "[128, 256, 4]"},
      {"qwen3moe", "blk.0.ffn_gate_inp.weight", {256, 8}, "[256, 4]"},
  };
  std::map<std::string, std::shared_ptr<const gguf::File>> base;
  for (const Case& c : cases) {
    auto& src = base[c.arch];
    if (!src) src = small_model(c.arch);
    ASSERT_NE(src->find_tensor(c.tensor), nullptr) << c.tensor;
    const std::string found = fmt::format("[{}]", fmt::join(c.bad, ", "));
    expect_refused(rewrite(*src, {c.tensor, c.bad, nullptr}), {fmt::format("'{}'", c.tensor), found, c.expected},
                   fmt::format("{} {} as {}", c.arch, c.tensor, found));
  }
}

TEST(LoadShapes, HyperParametersThatContradictTheTensorsAreRefused) {
  auto src = small_model("qwen2");
  // embedding_length 128 for a 256-wide file: the embedding is the first tensor loaded.
  expect_refused(rewrite(*src, {"", {}, [](gguf::Writer& w) { w.set_u32("qwen2.embedding_length", 128); }}),
                 {"'token_embd.weight'", "[256, 300]", "[128, 300]"}, "embedding_length 128");
  expect_refused(rewrite(*src, {"", {}, [](gguf::Writer& w) { w.set_u32("qwen2.feed_forward_length", 256); }}),
                 {"'blk.0.ffn_gate.weight'", "[256, 512]", "[256, 256]"}, "feed_forward_length 256");
  expect_refused(rewrite(*src, {"", {}, [](gguf::Writer& w) { w.set_u32("qwen2.attention.head_count_kv", 1); }}),
                 {"'blk.0.attn_k.weight'", "[256, 128]", "[256, 64]"}, "head_count_kv 1");
  // More layers than the file has: a missing tensor, named.
  expect_refused(rewrite(*src, {"", {}, [](gguf::Writer& w) { w.set_u32("qwen2.block_count", 3); }}),
                 {"needs tensor 'blk.2."}, "block_count 3");
  // Fewer: the last block's tensors are left over.
  expect_refused(rewrite(*src, {"", {}, [](gguf::Writer& w) { w.set_u32("qwen2.block_count", 1); }}),
                 {"does not use", "'blk.1."}, "block_count 1");
}

TEST(LoadShapes, QuantizedTensorsAreCheckedByElementCounts) {
  auto src = small_model("llama", "Q4_K_M");
  const gguf::TensorInfo* gate = src->find_tensor("blk.0.ffn_gate.weight");
  ASSERT_NE(gate, nullptr);
  ASSERT_NE(gate->type, DType::F16);  // a block type: the check must not compare bytes
  expect_refused(rewrite(*src, {"blk.0.ffn_gate.weight", {256, 768}, nullptr}),
                 {"'blk.0.ffn_gate.weight'", "[256, 768]", "[256, 512]"}, "Q4_K_M ffn_gate");
}

TEST(LoadShapes, AnUnusedTensorIsRefused) {
  // Qwen3 has no q/k/v biases: a file with one would lose it silently.
  expect_refused(rewrite(*small_model("qwen3"), {"blk.0.attn_q.bias", {256}, nullptr}),
                 {"does not use", "'blk.0.attn_q.bias'"}, "qwen3 with attn_q.bias");
}

TEST(LoadShapes, TensorParallelRanksCheckTheWholeTensor) {
  // attn_q of half its rows and attn_output of half its columns both split evenly over 2
  // ranks: only a check on the whole tensor, before the split, sees them.
  auto src = small_model("qwen3");
  auto load_rank = [](const std::shared_ptr<const gguf::File>& f) {
    auto group = std::make_shared<HostCollective>(2);
    CpuBackend cpu(1);
    cpu.join(group, 0);
    return error_of([&] { models::load(f, cpu, Shard{0, 2}); });
  };
  EXPECT_EQ(load_rank(src), "");
  struct Case {
    const char* tensor;
    std::vector<int64_t> bad;
    const char* expected;
  };
  for (const Case& c : {Case{"blk.0.attn_q.weight", {256, 128}, "[256, 256]"},
                        Case{"blk.1.attn_output.weight", {128, 256}, "[256, 256]"},
                        Case{"blk.0.ffn_down.weight", {256, 256}, "[512, 256]"}}) {
    const std::string err = load_rank(rewrite(*src, {c.tensor, c.bad, nullptr}));
    const std::string found = fmt::format("[{}]", fmt::join(c.bad, ", "));
    for (const std::string& s : {fmt::format("'{}'", c.tensor), found, std::string(c.expected)})
      EXPECT_NE(err.find(s), std::string::npos) << c.tensor << ": '" << s << "' not in: '" << err << "'";
  }
}

TEST(LoadShapes, ConcatRowsJoinsEachRunOfOneDtype) {
  // q and k of one dtype, v of another (a Q4_K_M file's Q6_K attn_v): q|k become one tensor of
  // concatenated rows, v loads alone; every part holds the file's bytes.
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> byte(0, 255);
  struct P {
    const char* name;
    DType type;
    int64_t rows;
    std::vector<uint8_t> bytes;
  };
  std::vector<P> parts = {{"q", DType::F16, 8, {}}, {"k", DType::F16, 4, {}}, {"v", DType::Q8_0, 4, {}}};
  gguf::Writer w;
  for (P& p : parts) {
    p.bytes.resize(dtype_nbytes(p.type, 64 * p.rows));
    for (auto& b : p.bytes) b = static_cast<uint8_t>(byte(rng));
    if (p.type == DType::F16)  // finite halves: no NaN payloads
      for (size_t i = 1; i < p.bytes.size(); i += 2) p.bytes[i] &= 0x3b;
    w.add_tensor(p.name, p.type, {64, p.rows}, p.bytes.data());
  }
  const auto path = std::filesystem::temp_directory_path() / fmt::format("minfer-concat-{}.gguf", ::getpid());
  w.write(path);
  auto file = std::make_shared<const gguf::File>(path);
  std::filesystem::remove(path);
  CpuBackend cpu(1);
  Weights W(file, cpu);
  const auto t = W.get_concat_rows({{"q", {64, 8}}, {"k", {64, 4}}, {"v", {64, 4}}});
  ASSERT_EQ(t.size(), 3u);
  Context ctx;
  EXPECT_NE(adjacent_rows(ctx, t[0], t[1]), nullptr) << "q|k: one tensor";
  EXPECT_EQ(adjacent_rows(ctx, t[1], t[2]), nullptr) << "v: another dtype";
  for (size_t i = 0; i < parts.size(); ++i) {
    ASSERT_EQ(t[i]->type, parts[i].type) << parts[i].name;
    ASSERT_EQ(t[i]->nbytes(), parts[i].bytes.size()) << parts[i].name;
    EXPECT_EQ(std::memcmp(t[i]->data, parts[i].bytes.data(), parts[i].bytes.size()), 0) << parts[i].name;
  }
}

}  // namespace
}  // namespace minfer::test
