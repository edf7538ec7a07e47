// minfer-speculative and minfer-generate --draft as a user runs them: the report (acceptance,
// speedup over plain decoding in the same run), the JSON object, and clear errors for a missing
// draft or a draft with another vocabulary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "common/test_util.h"
#include "gguf/gguf.h"

namespace minfer::test {
namespace {

const std::string gen = MINFER_GENERATE_BIN;
const std::string spec = MINFER_SPECULATIVE_BIN;

struct Pair {
  std::string target, draft;
};

// The pair; empty when the fixtures are absent.
Pair fixture_pair() {
  return {fixture("qwen3-s/qwen3-s-Q4_K_M.gguf").string(), fixture("qwen3-xs/qwen3-xs-Q8_0.gguf").string()};
}

#define SKIP_WITHOUT_FIXTURES(p) \
  if ((p).target.empty() || (p).draft.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir()

TEST(CliSpeculative, ZeroTokensIsPrefillOnlyAndRatesAreNull) {
  const Pair p = fixture_pair();
  SKIP_WITHOUT_FIXTURES(p);
  auto r = run_stdout(spec + " -m " + p.target + " -md " + p.draft + " -n 0 --temp 0 --json --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ids"].empty()) << r.out;
  const auto& s = j.at("speculative");
  EXPECT_EQ(s.at("drafted").get<int>(), 0);
  EXPECT_TRUE(s.at("acceptance_rate").is_null()) << "no draft, no rate: " << r.out;
  EXPECT_TRUE(s.at("mean_accepted_length").is_null()) << r.out;
}

TEST(CliSpeculative, TheTargetModelIsRequired) {
  const Pair p = fixture_pair();
  SKIP_WITHOUT_FIXTURES(p);
  auto r = run(spec + " -md " + p.draft + " --device cpu");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("needs the target model"), std::string::npos) << r.out;
}

TEST(CliSpeculative, GenerateWithADraftPrintsTheGenerateJsonPlusSpeculativeStats) {
  const Pair p = fixture_pair();
  SKIP_WITHOUT_FIXTURES(p);
  auto r = run_stdout(gen + " --draft " + p.draft + " -m " + p.target + " --temp 0 --json -n 16 --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  // What minfer-generate --json prints.
  for (const char* k : {"prompt_ids", "ids", "text", "stop_reason", "device", "seed", "timings"})
    EXPECT_TRUE(j.contains(k)) << k << " missing: " << r.out;
  EXPECT_EQ(j["ids"].size(), 16u);
  EXPECT_FALSE(j["prompt_ids"].empty());
  EXPECT_EQ(j["stop_reason"], "length");
  EXPECT_GT(j["timings"]["decode_tok_s"].get<double>(), 0.0);
  // The speculative part.
  const auto& s = j.at("speculative");
  const double rate = s.at("acceptance_rate").get<double>();
  EXPECT_GE(rate, 0.0);
  EXPECT_LE(rate, 1.0);
  const auto rounds = s.at("rounds").get<int64_t>(), drafted = s.at("drafted").get<int64_t>(),
             accepted = s.at("accepted").get<int64_t>();
  EXPECT_GT(rounds, 0);
  EXPECT_LE(accepted, drafted);
  EXPECT_EQ(accepted + rounds, 15) << "every token after the first comes from a verify round";
  EXPECT_NEAR(s.at("tokens_per_verify").get<double>(), static_cast<double>(accepted + rounds) / static_cast<double>(rounds), 1e-9);
  const auto drafting = s.at("drafting_rounds").get<int64_t>();
  EXPECT_EQ(drafting, rounds - s.at("depth_hist")[0].get<int64_t>());
  ASSERT_GT(drafting, 0);  // the policy drafts in the first rounds to measure
  EXPECT_NEAR(s.at("mean_accepted_length").get<double>(), static_cast<double>(accepted) / static_cast<double>(drafting), 1e-9);
  EXPECT_EQ(s.at("draft_max").get<int>(), 7);  // a verify of 8 rows: the CUDA batch-invariance limit
  EXPECT_TRUE(s.at("adaptive").get<bool>());
  EXPECT_NE(s.at("draft").get<std::string>().find("qwen3-xs-Q8_0"), std::string::npos);
  EXPECT_TRUE(s.contains("mean_draft_depth"));
  // The plain-decoding baseline of the same run: greedy, so the same ids.
  EXPECT_TRUE(j.at("baseline").at("ids_identical").get<bool>()) << r.out;
  EXPECT_GT(j.at("baseline").at("decode_tok_s").get<double>(), 0.0);
  EXPECT_GT(j.at("speedup").get<double>(), 0.0);
}

TEST(CliSpeculative, SpeculativePrintsAcceptanceAndSpeedup) {
  const Pair p = fixture_pair();
  SKIP_WITHOUT_FIXTURES(p);
  auto r = run(spec + " -m " + p.target + " -md " + p.draft + " --temp 0 -n 32 --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("def fibonacci(n):"), std::string::npos) << r.out;  // the text
  EXPECT_NE(r.out.find("acceptance rate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mean accepted length"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tok/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speedup"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("greedy ids identical"), std::string::npos) << r.out;
  // --no-baseline skips the plain run; a fixed depth and --chat work with a draft too.
  r = run(spec + " -m " + p.target + " --md " + p.draft +
          " --temp 0 -n 8 --no-baseline --no-adaptive --draft-max 3 --chat -p 'hello' --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("acceptance rate"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("speedup"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<|im_start|>"), std::string::npos) << r.out;
}

TEST(CliSpeculative, SpeculativeWithoutADraftIsAnError) {
  auto r = run(spec + " -n 4 --device cpu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--md"), std::string::npos) << r.out;
}

TEST(CliSpeculative, MissingDraftFileIsAClearError) {
  const Pair p = fixture_pair();
  SKIP_WITHOUT_FIXTURES(p);
  auto r = run(spec + " -m " + p.target + " -md /nonexistent/draft.gguf --device cpu");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("error: draft model file '/nonexistent/draft.gguf' does not exist"), std::string::npos) << r.out;
  r = run(gen + " --draft /nonexistent/draft.gguf --device cpu");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
}

TEST(CliSpeculative, DraftMinAboveDraftMaxIsAClearError) {
  const Pair p = fixture_pair();
  SKIP_WITHOUT_FIXTURES(p);
  auto r = run(spec + " -m " + p.target + " -md " + p.draft + " --draft-min 5 --draft-max 3 --device cpu");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--draft-min (5) must not exceed --draft-max (3)"), std::string::npos) << r.out;
}

TEST(CliSpeculative, DraftWithAnotherVocabularyIsRefused) {
  const Pair p = fixture_pair();
  SKIP_WITHOUT_FIXTURES(p);
  // qwen3-xs-f16 with token 1 renamed: a loadable model whose vocabulary is not the target's.
  const gguf::File src(fixture("qwen3-xs/qwen3-xs-f16.gguf"));
  gguf::Writer w;
  w.copy_kvs(src);
  auto views = src.get_string_array("tokenizer.ggml.tokens");
  std::vector<std::string> tokens(views.begin(), views.end());
  ASSERT_EQ(tokens.at(1), "<|im_start|>");
  tokens[1] = "<|im_begin|>";
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  for (const auto& t : src.tensors()) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  const auto path = std::filesystem::temp_directory_path() / ("minfer-cli-vocab-" + std::to_string(getpid()) + ".gguf");
  w.write(path);
  auto r = run(spec + " -m " + p.target + " -md " + path.string() + " --device cpu");
  std::filesystem::remove(path);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("error: draft model '" + path.string() + "'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocabulary differs from the target vocabulary"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<|im_begin|>"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace minfer::test
