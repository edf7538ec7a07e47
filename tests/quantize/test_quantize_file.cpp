// quantize_file against llama-quantize's outputs in the fixtures: byte-identical files for the
// K-quant mixes (minfer's K-quant encoders reproduce ggml's), same metadata / tensor table and no
// larger error than llama-quantize for the legacy mixes (minfer's encoders search further there).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "quantize/quantize_file.h"
#include "quantize_test_util.h"
#include "tensor/fp16.h"

namespace minfer::test {
namespace {

using quantize::parse_target;

std::vector<char> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

quantize::QuantizeParams params(const char* type, int threads = 2) {
  quantize::QuantizeParams p;
  p.target = parse_target(type);
  p.n_threads = threads;
  return p;
}

class KQuantMix : public ::testing::TestWithParam<const char*> {};

TEST_P(KQuantMix, ByteIdenticalToLlamaQuantize) {
  const std::string type = GetParam();
  const auto in = fixture("qwen2-s/qwen2-s-f16.gguf");
  const auto ref = fixture("qwen2-s/qwen2-s-" + type + ".gguf");
  if (in.empty() || ref.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  for (int threads : {1, 3}) {
    TempPath out("q2s-" + type);
    int reports = 0;
    const auto sum = quantize::quantize_file(in, out.path(), params(type.c_str(), threads),
                                             [&](const quantize::TensorReport& r) {
                                               EXPECT_EQ(r.index, static_cast<size_t>(reports));
                                               ++reports;
                                             });
    EXPECT_EQ(reports, 50);
    EXPECT_EQ(sum.n_tensors, 50u);
    const gguf::File f(out.path());  // strict reader
    const auto a = read_all(out.path()), b = read_all(ref);
    ASSERT_EQ(a.size(), b.size()) << threads << " threads";
    EXPECT_TRUE(a == b) << "differs from llama-quantize's " << ref << " (" << threads << " threads)";
    size_t bytes = 0;
    for (const auto& t : f.tensors()) bytes += t.nbytes;
    EXPECT_EQ(sum.bytes_out, bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(Qwen2S, KQuantMix, ::testing::Values("Q4_K_M", "Q5_K_M"));

double squared_error(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return s;
}

class LegacyMix : public ::testing::TestWithParam<const char*> {};

TEST_P(LegacyMix, SameLayoutAndNoWorseThanLlamaQuantize) {
  const std::string type = GetParam();
  const auto in_path = fixture("qwen3-xs/qwen3-xs-f16.gguf");
  const auto ref_path = fixture("qwen3-xs/qwen3-xs-" + type + ".gguf");
  if (in_path.empty() || ref_path.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  TempPath out("q3xs-" + type);
  quantize::quantize_file(in_path, out.path(), params(type.c_str()));
  const gguf::File in(in_path), ref(ref_path), f(out.path());

  // Metadata: every KV in the same order with the same bytes as llama-quantize wrote.
  ASSERT_EQ(f.n_kv(), ref.n_kv());
  for (size_t i = 0; i < f.n_kv(); ++i) {
    const auto& a = f.kvs()[i];
    const auto& b = ref.kvs()[i];
    EXPECT_EQ(a.key(), b.key());
    EXPECT_EQ(a.type(), b.type()) << a.key();
    EXPECT_TRUE(std::equal(a.raw().begin(), a.raw().end(), b.raw().begin(), b.raw().end())) << a.key();
  }
  EXPECT_EQ(f.data_offset(), ref.data_offset());

  ASSERT_EQ(f.n_tensors(), ref.n_tensors());
  for (size_t i = 0; i < f.n_tensors(); ++i) {
    const auto& t = f.tensors()[i];
    const auto& r = ref.tensors()[i];
    ASSERT_EQ(t.name, r.name) << "tensor order";
    EXPECT_EQ(t.type, r.type) << t.name;
    EXPECT_EQ(t.offset, r.offset) << t.name;
    for (int d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], r.ne[d]) << t.name;
    const auto ours = dequantize_tensor(t);
    for (float x : ours) ASSERT_TRUE(std::isfinite(x)) << t.name;
    if (!dtype_is_quantized(t.type)) {
      EXPECT_TRUE(std::equal(t.data, t.data + t.nbytes, r.data)) << t.name << " is copied unchanged";
      continue;
    }
    const auto orig = dequantize_tensor(in.tensor(t.name));
    const auto theirs = dequantize_tensor(r);
    const double e_ours = squared_error(ours, orig), e_theirs = squared_error(theirs, orig);
    EXPECT_LE(e_ours, e_theirs * (1 + 1e-5) + 1e-12) << t.name << ": minfer's encoder is worse than ggml's";
    // And not absurdly small either (the values were really quantized).
    EXPECT_GT(e_ours, 0.0) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Qwen3XS, LegacyMix, ::testing::Values("Q8_0", "Q4_0", "Q5_1"));

TEST(QuantizeFile, RequantizeNeedsTheFlag) {
  const auto in = fixture("qwen3-xs/qwen3-xs-Q8_0.gguf");
  if (in.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  TempPath out("requant");
  try {
    quantize::quantize_file(in, out.path(), params("Q4_0"));
    FAIL() << "requantized without --allow-requantize";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--allow-requantize"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(out.path()));
  auto p = params("Q4_0");
  p.allow_requantize = true;
  quantize::quantize_file(in, out.path(), p);
  const gguf::File f(out.path());
  EXPECT_EQ(f.tensor("blk.0.ffn_up.weight").type, DType::Q4_0);
  // Same dtype needs no flag: Q8_0 -> Q8_0 copies the bytes.
  TempPath same("same");
  quantize::quantize_file(in, same.path(), params("Q8_0"));
  const gguf::File a(in), b(same.path());
  for (const auto& t : a.tensors()) {
    const auto& u = b.tensor(t.name);
    EXPECT_TRUE(std::equal(t.data, t.data + t.nbytes, u.data, u.data + u.nbytes)) << t.name;
  }
}

TEST(QuantizeFile, PlainTypesAndFloatTargets) {
  const auto in_path = fixture("qwen2-s/qwen2-s-f16.gguf");
  if (in_path.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const gguf::File in(in_path);
  {
    TempPath out("pure-q4k");
    quantize::quantize_file(in_path, out.path(), params("q4_K"));
    const gguf::File f(out.path());
    EXPECT_EQ(f.get_u32("general.file_type"), 14u);
    for (const auto& t : f.tensors()) EXPECT_EQ(t.type, t.n_dims == 1 ? DType::F32 : DType::Q4_K) << t.name;
  }
  {
    TempPath out("f32");
    quantize::quantize_file(in_path, out.path(), params("F32"));
    const gguf::File f(out.path());
    EXPECT_EQ(f.get_u32("general.file_type"), 0u);
    for (const auto& t : in.tensors()) {
      const auto& u = f.tensor(t.name);
      ASSERT_EQ(u.type, DType::F32) << t.name;
      const float* x = reinterpret_cast<const float*>(u.data);
      for (int64_t i = 0; i < t.nelements(); ++i) {
        const float want = t.type == DType::F16 ? f16_to_f32(reinterpret_cast<const uint16_t*>(t.data)[i])
                                                : reinterpret_cast<const float*>(t.data)[i];
        ASSERT_EQ(x[i], want) << t.name << "[" << i << "]";
      }
    }
  }
}

TEST(QuantizeFile, NonFiniteInputFailsWithoutOutput) {
  TempPath in("nan-in"), out("nan-out");
  std::vector<float> w = randn(256 * 4, 0.02f);
  w[300] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> norm(256, 1.0f);
  gguf::Writer wr;
  wr.set_string("general.architecture", "qwen2");
  wr.set_u32("qwen2.block_count", 1);
  wr.add_tensor("blk.0.ffn_norm.weight", DType::F32, {256}, norm.data());
  wr.add_tensor("blk.0.ffn_up.weight", DType::F32, {256, 4}, w.data());
  wr.write(in.path());
  try {
    quantize::quantize_file(in.path(), out.path(), params("Q4_K_M"));
    FAIL() << "NaN quantized";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_up.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(out.path()));
  EXPECT_FALSE(std::filesystem::exists(out.str() + ".tmp"));
}

TEST(QuantizeFile, BadPaths) {
  const auto in = fixture("qwen3-xs/qwen3-xs-f16.gguf");
  if (in.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  EXPECT_THROW(quantize::quantize_file("/nonexistent/in.gguf", "/tmp/x.gguf", params("Q8_0")), gguf::Error);
  try {
    quantize::quantize_file(in, "/nonexistent-dir/out.gguf", params("Q8_0"));
    FAIL() << "wrote into a missing directory";
  } catch (const gguf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/out.gguf"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minfer::test
