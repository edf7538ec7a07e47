// The fixture GGUF files (written by llama.cpp's converter and quantizer, not by this project):
// every one opens, every tensor lies inside the file, the shapes of qwen3-xs match the fixture
// README, the real Qwen vocab opens fast, and re-writing a file with gguf::Writer reproduces it
// byte for byte (same layout as the ggml/gguf-py writers).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace {

using namespace gguf_test;
using minfer::DType;
using minfer::gguf::File;
using minfer::gguf::Writer;

std::vector<std::filesystem::path> fixture_ggufs() {
  std::vector<std::filesystem::path> out;
  const auto dir = fixtures_dir();
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".gguf") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

#define REQUIRE_FIXTURE(path)                                                        \
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixtures not found at " << (path)

TEST(GgufFixtures, EveryFileOpensAndEveryTensorLiesInside) {
  const auto files = fixture_ggufs();
  if (files.empty()) GTEST_SKIP() << "fixtures not found at " << fixtures_dir();
  EXPECT_GE(files.size(), 9u);
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    const File f(p);
    EXPECT_TRUE(f.version() == 2 || f.version() == 3);
    EXPECT_TRUE(f.has("general.architecture"));
    const uint8_t* begin = f.bytes().data();
    const uint8_t* end = begin + f.bytes().size();
    EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
    for (const auto& t : f.tensors()) {
      ASSERT_GE(t.data, begin + f.data_offset()) << t.name;
      ASSERT_LE(t.nbytes, static_cast<size_t>(end - t.data)) << t.name;
      EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
      EXPECT_EQ(t.data, begin + f.data_offset() + t.offset) << t.name;
      EXPECT_EQ(t.nbytes, minfer::dtype_nbytes(t.type, t.nelements())) << t.name;
    }
  }
}

// Shapes from the fixture README: hidden 128, 2 layers, 2 heads / 1 kv head, head_dim 64,
// ffn 384, vocab 8192, tied output (no output.weight). ggml order: ne[0] is the input dim.
TEST(GgufFixtures, Qwen3XsF16HasTheDocumentedShapes) {
  const auto path = fixtures_dir() / "qwen3-xs" / "qwen3-xs-f16.gguf";
  REQUIRE_FIXTURE(path);
  const File f(path);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_u32("qwen3.block_count"), 2u);
  EXPECT_EQ(f.get_u32("qwen3.embedding_length"), 128u);
  EXPECT_EQ(f.get_u32("qwen3.feed_forward_length"), 384u);
  EXPECT_EQ(f.get_u32("qwen3.attention.head_count"), 2u);
  EXPECT_EQ(f.get_u32("qwen3.attention.head_count_kv"), 1u);
  EXPECT_EQ(f.get_u32("qwen3.attention.key_length"), 64u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 8192u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")[0], "<|endoftext|>");

  struct Expect {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
  };
  std::vector<Expect> want = {{"token_embd.weight", DType::F16, {128, 8192}},
                              {"output_norm.weight", DType::F32, {128}}};
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    want.push_back({b + "attn_norm.weight", DType::F32, {128}});
    want.push_back({b + "attn_q.weight", DType::F16, {128, 128}});
    want.push_back({b + "attn_k.weight", DType::F16, {128, 64}});
    want.push_back({b + "attn_v.weight", DType::F16, {128, 64}});
    want.push_back({b + "attn_output.weight", DType::F16, {128, 128}});
    want.push_back({b + "attn_q_norm.weight", DType::F32, {64}});
    want.push_back({b + "attn_k_norm.weight", DType::F32, {64}});
    want.push_back({b + "ffn_norm.weight", DType::F32, {128}});
    want.push_back({b + "ffn_gate.weight", DType::F16, {128, 384}});
    want.push_back({b + "ffn_up.weight", DType::F16, {128, 384}});
    want.push_back({b + "ffn_down.weight", DType::F16, {384, 128}});
  }
  EXPECT_EQ(f.n_tensors(), want.size());
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  for (const auto& w : want) {
    SCOPED_TRACE(w.name);
    const auto* t = f.find_tensor(w.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, w.type);
    ASSERT_EQ(t->n_dims, static_cast<int>(w.ne.size()));
    for (size_t d = 0; d < w.ne.size(); ++d) EXPECT_EQ(t->ne[d], w.ne[d]);
    int64_t n = 1;
    for (int64_t x : w.ne) n *= x;
    EXPECT_EQ(t->nbytes, static_cast<size_t>(n) * (w.type == DType::F16 ? 2 : 4));
  }
}

TEST(GgufFixtures, QwenVocabOpensFast) {
  const auto path = fixtures_dir() / "tokenizer" / "qwen-vocab.gguf";
  REQUIRE_FIXTURE(path);
  const auto t0 = std::chrono::steady_clock::now();
  const File f(path);
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto merges = f.get_string_array("tokenizer.ggml.merges");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tokens.size(), 151936u);
  EXPECT_EQ(merges.size(), 151387u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(merges[0], "Ġ Ġ");
  EXPECT_LT(secs, 0.5) << "opening and listing the vocab took " << secs << " s";
  std::printf("[ timing ] qwen-vocab.gguf open + list tokens and merges: %.1f ms\n", secs * 1e3);
}


// Rewriting what the reader saw (all KVs, all tensors) gives back the llama.cpp-written file
// byte for byte: the writer's layout is the ggml/gguf-py layout.
TEST(GgufFixtures, RewriteReproducesTheFileByteForByte) {
  const auto files = fixture_ggufs();
  if (files.empty()) GTEST_SKIP() << "fixtures not found at " << fixtures_dir();
  TempDir dir;
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    const File f(p);
    if (f.version() != 3) continue;
    Writer w;
    w.copy_kvs(f);
    w.copy_layout(f);  // tensor-less files: padded (qwen-vocab, ggml) or not (llama3-vocab, gguf-py)
    for (const auto& t : f.tensors())
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    const auto out = dir.path / p.filename();
    w.write(out);
    const std::vector<uint8_t> a = read_all(p), b = read_all(out);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_TRUE(a == b);
  }
}

}  // namespace
