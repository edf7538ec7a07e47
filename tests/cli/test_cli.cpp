// The programs as a user runs them: the default run works, bad input gives a clear message and a
// non-zero exit code.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "cli_run.h"
#include "common/test_util.h"
#include "gguf/gguf.h"

namespace minfer::test {
namespace {

const std::string gen = MINFER_GENERATE_BIN;

TEST(Cli, DefaultRunGeneratesText) {
  auto r = run(gen + " -n 8 --temp 0 --device cpu");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("def fibonacci(n):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tok/s"), std::string::npos) << r.out;
}

TEST(Cli, JsonOutputHasIdsTextAndTimings) {
  auto r = run(gen + " -n 6 --temp 0 --json --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ids"].size(), 6u);
  EXPECT_FALSE(j["prompt_ids"].empty());
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_GT(j["timings"]["decode_tok_s"].get<double>(), 0.0);
  EXPECT_GT(j["timings"]["prefill_tok_s"].get<double>(), 0.0);
  // Greedy is deterministic: the same command gives the same ids.
  auto again = nlohmann::json::parse(run(gen + " -n 6 --temp 0 --json --device cpu").out);
  EXPECT_EQ(j["ids"], again["ids"]);
}

// --parallel: every line a prompt, several decoded at once, results in prompt order, each the
// same greedy ids as that prompt alone (the CPU is batch-invariant).
TEST(Cli, ParallelPromptsComeBackInOrderAndEqualSoloRuns) {
  const auto dir = std::filesystem::temp_directory_path() / ("minfer_parallel_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::vector<std::string> prompts = {"import os", "def main():", "class Foo(object):", "x = [",
                                            "for i in range(10):"};
  {
    std::ofstream f(dir / "prompts.txt");
    for (const auto& p : prompts) f << p << "\n";
    f << "\n";  // an empty line is not a prompt
  }
  auto r = run_stdout(gen + " --parallel 3 -f " + (dir / "prompts.txt").string() + " -n 12 --temp 0 --json --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), prompts.size());
  EXPECT_EQ(j["parallel"].get<int>(), 3);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& got = j["results"][i];
    EXPECT_EQ(got["prompt"].get<std::string>(), prompts[i]);
    const auto solo = nlohmann::json::parse(
        run_stdout(gen + " -p '" + prompts[i] + "' -n 12 --temp 0 --json --no-escape --device cpu").out);
    EXPECT_EQ(got["ids"], solo["ids"]) << prompts[i];
    EXPECT_EQ(got["prompt_ids"], solo["prompt_ids"]) << prompts[i];
  }
  EXPECT_NE(run(gen + " --parallel 2 -p x").code, 0);  // needs -f
  std::filesystem::remove_all(dir);
}

TEST(Cli, ZeroTokensIsPrefillOnly) {
  auto r = run(gen + " -n 0 --temp 0 --json --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ids"].empty()) << r.out;
  EXPECT_EQ(j["stop_reason"], "length");
  EXPECT_GT(j["timings"]["prefill_tokens"].get<int>(), 0);
}

TEST(Cli, BadArgumentsExitWithOneAndHelpWithZero) {
  auto r = run(gen + " --no-such-flag");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--no-such-flag"), std::string::npos) << r.out;
  r = run(gen + " -n abc");
  EXPECT_EQ(r.code, 1) << r.out;
  r = run(gen + " --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--n-predict"), std::string::npos) << r.out;
  // Flags that must be positive say so in a line (CLI11's own check printed the whole double
  // range, 300 digits of it, a range that seemed to include 0).
  for (const auto& [flags, says] : {std::pair<std::string, std::string>{" -b 0", "--batch-size: must be >= 1, got 0"},
                                    {" -t -2", "--threads: must be 0 (all) to 512, got -2"},
                                    {" -c -1", "--ctx-size: must be >= 0, got -1"},
                                    {" --rope-scale 0", "--rope-scale: must be > 0, got 0"},
                                    {" --min-p 2", "--min-p: must be <= 1, got 2"},
                                    {" --yarn-ext-factor nan", "--yarn-ext-factor: must be a finite number, got nan"},
                                    {" --yarn-attn-factor inf", "--yarn-attn-factor: must be a finite number, got inf"}}) {
    r = run(gen + flags + " --device cpu");
    EXPECT_EQ(r.code, 1) << flags << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << flags << ": " << r.out;
    EXPECT_EQ(r.out.find("0000000000"), std::string::npos) << flags << ": " << r.out;
  }
}

// -n -1 generates until the context is full (llama.cpp's meaning).
TEST(Cli, MinusOneTokensRunsToTheEndOfTheContext) {
  auto r = run_stdout(gen + " -n -1 -c 32 --ignore-eos --temp 0 --json --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stop_reason"], "context") << r.out;
  EXPECT_GE(j["ids"].size() + j["prompt_ids"].size(), 32u) << r.out;
}

// -sm tensor over --device cpu,cpu: two tensor-parallel ranks in one process (HostCollective).
// f16 weights: the sharded sums are the full ones reordered, so greedy keeps the one-device ids.
TEST(Cli, TensorSplitOverTwoCpuRanksKeepsTheGreedyIds) {
  for (const char* name : {"qwen2-s/qwen2-s-f16.gguf", "llama-s/llama-s-f16.gguf"}) {
    const auto path = std::filesystem::path(fixtures_dir()) / name;
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found (MINFER_FIXTURES)";
    const std::string base = gen + " -m " + path.string() + " -p 'Once upon a time there was a' -n 24 --temp 0 --json";
    auto one = run_stdout(base + " --device cpu");
    auto two = run_stdout(base + " --device cpu,cpu -sm tensor -ts 1,1");
    ASSERT_EQ(one.code, 0) << one.out;
    ASSERT_EQ(two.code, 0) << two.out;
    const auto a = nlohmann::json::parse(one.out), b = nlohmann::json::parse(two.out);
    EXPECT_EQ(a["ids"].size(), 24u) << name;
    EXPECT_EQ(a["ids"], b["ids"]) << name;
  }
}

TEST(Cli, SplitFlagsThatCannotWorkAreClearErrors) {
  const auto model = std::filesystem::path(fixtures_dir()) / "qwen2-s/qwen2-s-f16.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const std::string m = " -n 2 -m " + model.string();
  for (const auto& [flags, says] :
       {std::pair<std::string, std::string>{" --device cpu,cpu", "--device lists 2 devices: add -sm tensor"},
        {" --device cpu,cpu -sm tensor -ts 3,1", "-ts '3,1' must give each of the 2 devices the same positive share"},
        {" --device cpu,cpu -sm tensor -ts 1,x", "-ts '1,x': 'x' is not a number"},
        {" --device cpu,cuda:0 -sm tensor", "the ranks must all be CPUs or all CUDA devices"},
        {" -sm layer", "-sm layer is not implemented"},
        {" -sm bogus", "--split-mode"}}) {
    auto r = run(gen + m + flags);
    EXPECT_EQ(r.code, 1) << flags << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << flags << ": " << r.out;
  }
  // -ts with one device is ignored, as llama.cpp does.
  auto one = run(gen + m + " -ts 3,1 --device cpu");
  EXPECT_EQ(one.code, 0) << one.out;
  // The default model has one KV head: it cannot be split in two.
  auto r = run(gen + " -n 2 --device cpu,cpu -sm tensor");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("head_count_kv (1) to be a multiple of 2"), std::string::npos) << r.out;
}

TEST(Cli, MissingFileIsAClearError) {
  auto r = run(gen + " -m /nonexistent/model.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("error: model file '/nonexistent/model.gguf' does not exist"), std::string::npos) << r.out;
}

TEST(Cli, NonGgufFileIsAClearError) {
  auto path = std::filesystem::temp_directory_path() / "minfer_not_a_gguf.txt";
  std::ofstream(path) << "this is not a model\n";
  auto r = run(gen + " -m " + path.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("error:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("magic"), std::string::npos) << r.out;
}

TEST(Cli, UnsupportedArchitectureIsAClearError) {
  auto path = std::filesystem::temp_directory_path() / "minfer_llama_arch.gguf";
  gguf::Writer w;
  w.set_string("general.architecture", "falcon-h1");
  w.write(path);
  auto r = run(gen + " -m " + path.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unsupported architecture \"falcon-h1\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qwen3"), std::string::npos) << r.out;  // lists the supported ones
  // The file's bytes are escaped: a NUL used to end the message after "'qwen3moe".
  gguf::Writer w2;
  w2.set_string("general.architecture", std::string("qwen3moe\0junk", 13));
  w2.write(path);
  r = run(gen + " -m " + path.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unsupported architecture \"qwen3moe\\x00junk\" (supported: "), std::string::npos) << r.out;
}

// A text file flag given a directory names it (or an endless device, its size limit); benchmark sizes whose positions or KV cells pass
// 2^30 are refused before anything is sized (sums past 2^31 wrapped into negative pool sizes);
// batched-bench refuses an empty prompt and counts the pool in whole KV blocks: a row that fits
// the cells but not the blocks is skipped up front instead of failing half-way.
TEST(Cli, BadSizesAndPathsAreClearErrors) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string batched = MINFER_BATCHED_BENCH_BIN, bench = MINFER_BENCH_BIN;
  for (const std::string& cmd : {gen + " -f " + dir + " -n 2 --device cpu", std::string(MINFER_PERPLEXITY_BIN) + " -f " + dir}) {
    const auto r = run(cmd);
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.out.find("is a directory"), std::string::npos) << cmd << ": " << r.out;
  }
  {  // an endless device is refused at the size limit instead of filling memory
    const std::string cmd = std::string(MINFER_PERPLEXITY_BIN) + " -f /dev/zero --device cpu";
    const auto r = run(cmd);
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.out.find("'/dev/zero' is longer than 256 MiB"), std::string::npos) << r.out;
  }
  struct Case {
    std::string cmd, message;
  };
  const Case cases[] = {
      {bench + " -p 2147483647 -n 0 --device cpu", "more than minfer-bench takes"},
      {bench + " -p 8 -n 8 -d 2147483640 --device cpu", "more than minfer-bench takes"},
      {batched + " -npp 2147483647 -ntg 8 -npl 1 --device cpu", "more than minfer-batched-bench takes"},
      {batched + " -npp 32 -ntg 8 -npl 2147483647 --device cpu", "more than minfer-batched-bench takes"},
      {batched + " -npp 0 -ntg 8 -npl 1 --device cpu", "-npp values must be >= 1"},
  };
  for (const Case& c : cases) {
    const auto r = run(c.cmd);
    EXPECT_EQ(r.code, 1) << c.cmd << ": " << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.cmd << ": " << r.out;
  }
  // 4 sequences of 40 tokens are 160 cells but 8 blocks of 32 (256 cells).
  const auto r = run(batched + " -npp 32 -ntg 8 -npl 4,1 -c 160 --device cpu");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("skipping PP 32 TG 8 B 4: needs 256 cells"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("|    32 |      8 |    1 |     40 |"), std::string::npos) << r.out;
}

TEST(Cli, PromptLongerThanTheContextIsAClearError) {
  auto r = run(gen + " -c 8 -p 'import os\nimport sys\nimport json\nimport time\n' --device cpu");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("but the context holds 8"), std::string::npos) << r.out;
}

TEST(Cli, GenerationStopsCleanlyWhenTheContextIsFull) {
  auto r = run(gen + " -c 16 -n 100 --temp 0 --device cpu");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("context full"), std::string::npos) << r.out;
}

TEST(Cli, ImpossibleContextIsAnOutOfMemoryMessage) {
  auto r = run(gen + " -c 2000000000 --device cpu");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("a smaller context: -c"), std::string::npos) << r.out;
  // Past the cells a cache can index: a range error, not an overflowed block count.
  r = run(gen + " -c 2147483617 --device cpu");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("cells a cache can index"), std::string::npos) << r.out;
}

TEST(Cli, PerplexityPrintsTheFinalLine) {
  auto text = fixture("text/python-val.txt");
  if (text.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  auto r = run(std::string(MINFER_PERPLEXITY_BIN) + " -f " + text.string() + " -c 128 --chunks 2 --device cpu");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PPL = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" +/- "), std::string::npos) << r.out;
}

// What a llama.cpp user types and a new user hit: flags with nothing to do here are accepted,
// --chunks outside -1 / >= 1 is refused, mkmodel without --n-head-kv makes plain multi-head
// attention, a vocab-only file given as a model says so.
TEST(Cli, LlamaCppHabits) {
  auto r = run(gen + " --no-mmap --mlock -n 2 --device cpu");
  EXPECT_EQ(r.code, 0) << r.out;
  // A flag given twice takes its last value (CLI11 refused it: "At Most 1 required but received 2").
  r = run(gen + " -n 9 --temp 0 --json --device cpu -n 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"].size(), 3u) << r.out;
  for (const char* chunks : {"0", "-5"}) {
    r = run(std::string(MINFER_PERPLEXITY_BIN) + " -f /dev/null --chunks " + chunks + " --device cpu");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("give -1 (all) or a count >= 1"), std::string::npos) << chunks << ": " << r.out;
  }
  const auto out = std::filesystem::temp_directory_path() / ("minfer-cli-mk-" + std::to_string(::getpid()) + ".gguf");
  r = run(std::string(MINFER_MKMODEL_BIN) + " --arch qwen3 --n-embd 64 --n-layer 1 --n-head 2 --n-ff 128 --n-vocab 300 -o " +
          out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(gguf::File(out).get_u32("qwen3.attention.head_count_kv"), 2u);
  std::filesystem::remove(out);
  const auto vocab = fixture("tokenizer/qwen-vocab.gguf");
  if (!vocab.empty()) {
    r = run(gen + " -m " + vocab.string() + " -n 1 --device cpu");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("a vocab-only file"), std::string::npos) << r.out;
  }
}

// Inputs from a hunt for ways to hurt the user: a thread count typo would start 100,000 threads,
// a seed past 2^64 - 2 silently became "random", a benchmark shorter than its 16-token warm-up
// failed with advice to raise -c, a number given to --draft (llama.cpp's old token count) read as
// a missing file.
TEST(Cli, TyposAreClearErrorsAndTinyBenchmarksRun) {
  const std::string quantize = MINFER_QUANTIZE_BIN, batched = MINFER_BATCHED_BENCH_BIN;
  const std::vector<std::pair<std::string, std::string>> refused = {
      {gen + " -t 100000 -n 1 --device cpu", "--threads: must be 0 (all) to 512, got 100000"},
      {gen + " -s 18446744073709551616 -n 1 --device cpu", "--seed: must be -1 (random) or an integer"},
      {gen + " -s 18446744073709551615 -n 1 --device cpu", "--seed: must be -1 (random) or an integer"},
      {quantize + " in.gguf out.gguf Q8_0 1000000", "nthreads: must be 0 (all) to 512"},
      {std::string(MINFER_MKMODEL_BIN) + " -t 100000 -o /tmp/x.gguf", "--threads: must be 0 (all) to 512"},
  };
  for (const auto& [cmd, want] : refused) {
    const auto r = run(cmd);
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << cmd << "\n" << r.out;
  }
  auto r = run(gen + " -s 18446744073709551614 -n 2 --temp 1 --device cpu");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("18446744073709551614"), std::string::npos) << "the seed is printed: " << r.out;
  r = run(batched + " -npp 8 -ntg 4 -npl 1,2 -c 4096 --device cpu");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("|     8 |      4 |    2 |"), std::string::npos) << r.out;
}

TEST(Cli, RopeFlagsOverrideTheModelsScaling) {
  // llama.cpp's --rope-* / --yarn-* flags reach the model: the same text scores differently with
  // the default model's RoPE stretched 2x; bad values are rejected like every other bad flag.
  auto text = fixture("text/python-val.txt");
  if (text.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const std::string ppl = std::string(MINFER_PERPLEXITY_BIN) + " -f " + text.string() + " -c 128 --chunks 2 --device cpu";
  auto final_line = [](const std::string& out) { return out.substr(out.rfind("PPL = ")); };
  auto plain = run(ppl), linear = run(ppl + " --rope-scaling linear --rope-scale 2"),
       yarn = run(ppl + " --rope-scaling yarn --rope-scale 2 --yarn-orig-ctx 64 --yarn-beta-fast 16");
  ASSERT_EQ(plain.code, 0) << plain.out;
  ASSERT_EQ(linear.code, 0) << linear.out;
  ASSERT_EQ(yarn.code, 0) << yarn.out;
  EXPECT_NE(final_line(plain.out), final_line(linear.out));
  EXPECT_NE(final_line(plain.out), final_line(yarn.out));
  EXPECT_NE(final_line(linear.out), final_line(yarn.out));
  EXPECT_EQ(final_line(run(ppl + " --rope-scaling none").out), final_line(plain.out));  // the model has none
  for (const char* bad : {"--rope-scaling longrope", "--rope-scale 2 --rope-freq-scale 0.5", "--rope-freq-base -1",
                          "--yarn-orig-ctx 0"}) {
    auto r = run(gen + " -n 1 --device cpu " + bad);
    EXPECT_EQ(r.code, 1) << bad << ": " << r.out;
  }
}

}  // namespace
}  // namespace minfer::test
