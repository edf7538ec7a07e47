// minfer-quantize and minfer-mkmodel as programs: success output, and a clear "error: ..." with
// exit code 1 for bad input.
#include <gtest/gtest.h>

#include <fstream>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "quantize_test_util.h"

namespace minfer::test {
namespace {

#if defined(MINFER_QUANTIZE_BIN) && defined(MINFER_MKMODEL_BIN)

const std::string kQuantize = MINFER_QUANTIZE_BIN;
const std::string kMkmodel = MINFER_MKMODEL_BIN;

void expect_error(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.output;
}

TEST(QuantizeCli, QuantizesAndSummarizes) {
  const auto in = fixture("qwen3-xs/qwen3-xs-f16.gguf");
  if (in.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  TempPath out("cli-q8");
  const auto r = run_command(kQuantize + " " + shell_quote(in.string()) + " " + shell_quote(out.str()) + " --type Q8_0 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("f16 -> q8_0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("quant size"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("BPW"), std::string::npos) << r.output;
  const gguf::File f(out.path());
  EXPECT_EQ(f.get_u32("general.file_type"), 7u);
}

TEST(QuantizeCli, PositionalTypeAndThreadsAsLlamaQuantize) {
  const auto in = fixture("qwen3-xs/qwen3-xs-f16.gguf");
  if (in.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  TempPath out("cli-pos");
  const auto r = run_command(kQuantize + " " + shell_quote(in.string()) + " " + shell_quote(out.str()) + " Q5_K_M 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(gguf::File(out.path()).get_u32("general.file_type"), 17u);  // LLAMA_FTYPE_MOSTLY_Q5_K_M
  expect_error(run_command(kQuantize + " " + shell_quote(in.string()) + " " + shell_quote(out.str())), "target type");
  expect_error(run_command(kQuantize + " " + shell_quote(in.string()) + " " + shell_quote(out.str()) + " Q8_0 --type Q4_0"),
               "two target types");
}

TEST(QuantizeCli, BadInputExitsWithOne) {
  const auto in = fixture("qwen3-xs/qwen3-xs-f16.gguf");
  if (in.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  TempPath out("cli-bad");
  expect_error(run_command(kQuantize + " /nonexistent/model.gguf " + shell_quote(out.str()) + " --type Q4_K_M"),
               "/nonexistent/model.gguf");
  expect_error(run_command(kQuantize + " " + shell_quote(in.string()) + " " + shell_quote(out.str()) + " --type Q4_K_X"),
               "Q4_K_X");
  expect_error(run_command(kQuantize + " " + shell_quote(in.string()) + " /nonexistent-dir/out.gguf --type Q8_0"),
               "/nonexistent-dir/out.gguf");
  expect_error(run_command(kQuantize + " " + shell_quote(in.string()) + " " + shell_quote(in.string()) + " --type Q8_0"),
               "is the input file");
  // A file that is not GGUF.
  TempPath junk("cli-junk");
  { std::ofstream(junk.path()) << "not a gguf file at all"; }
  const auto r = run_command(kQuantize + " " + shell_quote(junk.str()) + " " + shell_quote(out.str()) + " --type Q8_0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out.path()));
}

TEST(MkmodelCli, MakesASmallModel) {
  TempPath out("cli-mk");
  const auto r = run_command(kMkmodel +
                             " --arch qwen3 --n-embd 128 --n-layer 2 --n-head 2 --n-head-kv 1 --head-dim 64 --n-ff 256"
                             " --n-vocab 400 --tied -t 2 -o " + shell_quote(out.str()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("M params/s"), std::string::npos) << r.output;
  const gguf::File f(out.path());
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_u32("general.file_type"), 15u);
  EXPECT_EQ(f.tensor("token_embd.weight").ne[1], 400);
  // A named shape keeps its tied embedding and its name; --n-layer / --n-vocab override it.
  TempPath named("cli-mk-named");
  const auto rn = run_command(kMkmodel + " --shape qwen2.5-0.5b --n-layer 1 --n-vocab 1000 -q -t 2 -o " +
                              shell_quote(named.str()));
  ASSERT_EQ(rn.exit_code, 0) << rn.output;
  const gguf::File g(named.path());
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr) << "qwen2.5-0.5b is tied";
  EXPECT_EQ(g.get_u32("qwen2.embedding_length"), 896u);
  EXPECT_EQ(g.get_u32("qwen2.feed_forward_length"), 4864u);
  EXPECT_EQ(g.get_u32("qwen2.block_count"), 1u);
  EXPECT_NE(std::string(g.get_string("general.name")).find("Qwen2.5 0.5B"), std::string::npos);
  const auto list = run_command(kMkmodel + " --list-shapes");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_NE(list.output.find("qwen2.5-7b"), std::string::npos) << list.output;
}

TEST(MkmodelCli, BadInputExitsWithOne) {
  TempPath out("cli-mk-bad");
  expect_error(run_command(kMkmodel + " --shape qwen9-1b -o " + shell_quote(out.str())), "qwen9-1b");
  expect_error(run_command(kMkmodel + " --shape qwen2.5-0.5b --type Q4_K_X -o " + shell_quote(out.str())), "Q4_K_X");
  expect_error(run_command(kMkmodel + " --shape qwen2.5-0.5b --n-layer 1 --vocab /nonexistent/v.gguf -o " +
                           shell_quote(out.str())),
               "/nonexistent/v.gguf");
  expect_error(run_command(kMkmodel + " --shape qwen2.5-0.5b --n-layer 1 -o /nonexistent-dir/m.gguf"),
               "/nonexistent-dir/m.gguf");
  expect_error(run_command(kMkmodel + " --arch qwen2 --n-embd 100 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 128"
                                      " --n-vocab 300 -o " + shell_quote(out.str())),
               "n_embd");
  expect_error(run_command(kMkmodel + " -o " + shell_quote(out.str())), "--shape");
  EXPECT_FALSE(std::filesystem::exists(out.path()));
}

#else
TEST(QuantizeCli, NotBuilt) { GTEST_SKIP() << "examples not built (MINFER_BUILD_EXAMPLES=OFF)"; }
#endif

}  // namespace
}  // namespace minfer::test
