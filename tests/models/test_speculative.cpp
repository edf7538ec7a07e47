// Speculative decoding on the fixture models: greedy output is identical to plain greedy decoding
// (the pair: qwen3-s Q4_K_M verified, qwen3-xs Q8_0 drafting, on the 5 prompts of
// qwen3-s/refs.json); a draft equal to the target is always accepted; a draft whose vocabulary
// differs is refused. (The acceptance rule and the depth policy alone: tests/runtime.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/test_util.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {
namespace {

constexpr const char* kTarget = "qwen3-s/qwen3-s-Q4_K_M.gguf";
constexpr const char* kDraft = "qwen3-xs/qwen3-xs-Q8_0.gguf";

SamplerParams greedy_params() {
  SamplerParams p;
  p.temp = 0;
  return p;
}

TEST(SpeculativeGreedy, IdenticalToPlainGreedyOnTheReferencePrompts) {
  auto tf = open_fixture(kTarget), df = open_fixture(kDraft);
  const auto refs = load_refs("qwen3-s");
  if (!tf || !df || refs.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  ASSERT_EQ(refs.size(), 5u);
  CpuBackend cpu(2);
  auto target = models::load(tf, cpu);
  auto draft = models::load(df, cpu);
  const auto tok = tokenizer::Tokenizer::from_gguf(*tf);
  const auto dtok = tokenizer::Tokenizer::from_gguf(*df);
  SessionParams sp;
  sp.n_ctx = 512;  // the longest prompt has 336 tokens
  GenerateParams gp;
  gp.n_predict = 64;
  gp.stop_at_eog = false;
  int64_t drafted = 0, accepted = 0;
  for (size_t c = 0; c < refs.size(); ++c) {
    const auto& prompt = refs[c].ids;
    Session plain(*target, cpu, sp);
    Sampler s1(greedy_params());
    const GenerateResult ref = generate(plain, tok, s1, prompt, gp);
    ASSERT_EQ(ref.ids.size(), 64u);
    for (bool adaptive : {true, false}) {
      Session ts(*target, cpu, sp), ds(*draft, cpu, sp);
      SpeculativeParams spp;
      spp.adaptive = adaptive;
      spp.n_draft = adaptive ? 7 : 4;
      spp.n_draft_min = adaptive ? 0 : 1;
      SpeculativeDecoder dec(ts, tok, ds, dtok, spp);
      Sampler s2(greedy_params());
      const GenerateResult got = dec.generate(tok, s2, prompt, gp);
      EXPECT_EQ(got.ids, ref.ids) << "prompt " << c << (adaptive ? " adaptive" : " fixed depth 4");
      EXPECT_EQ(got.text, ref.text);
      EXPECT_EQ(got.stop_reason, "length");
      // The target cache holds exactly the committed tokens but the last.
      EXPECT_EQ(ts.n_past(), static_cast<int32_t>(prompt.size() + got.ids.size() - 1));
      const SpeculativeStats& st = dec.stats();
      EXPECT_LE(st.n_accepted, st.n_drafted);
      // Every committed token but the prefill's comes from a round: its accepted drafts + one (no
      // round overshoots n_predict: the depth is capped by what is left).
      EXPECT_EQ(st.n_accepted + st.n_rounds, static_cast<int64_t>(got.ids.size()) - 1);
      int64_t hist = 0, hist_drafted = 0;
      for (size_t d = 0; d < st.depth_hist.size(); ++d) {
        hist += st.depth_hist[d];
        hist_drafted += st.depth_hist[d] * static_cast<int64_t>(d);
      }
      EXPECT_EQ(hist, st.n_rounds);
      EXPECT_EQ(hist_drafted, st.n_drafted);
      if (!adaptive) {  // depth 4 but in the last rounds, capped by the tokens left
        ASSERT_EQ(st.depth_hist.size(), 5u);
        EXPECT_GE(st.depth_hist[4], st.n_rounds - 4);
      }
      std::printf("[ spec ] prompt %zu (%zu tokens) %s: %lld rounds, acceptance %.1f%%, mean accepted %.2f, %.2f tokens/verify, "
                  "mean depth %.2f\n",
                  c, prompt.size(), adaptive ? "adaptive 0..7" : "fixed 4", static_cast<long long>(st.n_rounds),
                  100 * st.acceptance_rate(), st.mean_accepted_length(), st.tokens_per_verify(), st.mean_draft_depth());
      drafted += st.n_drafted;
      accepted += st.n_accepted;
    }
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0) << "the draft is a smaller model of the same text: some drafts must be accepted";
}

TEST(SpeculativeGreedy, ADraftWithHolesInItsContextChangesNothingButAcceptance) {
  // catch_up_window 0: every committed token the draft has not evaluated is skipped, so its
  // context fills with holes and its positions trail the target's. The output must not change.
  auto tf = open_fixture(kTarget), df = open_fixture(kDraft);
  const auto refs = load_refs("qwen3-s");
  if (!tf || !df || refs.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  CpuBackend cpu(2);
  auto target = models::load(tf, cpu);
  auto draft = models::load(df, cpu);
  const auto tok = tokenizer::Tokenizer::from_gguf(*tf);
  SessionParams sp;
  sp.n_ctx = 256;
  GenerateParams gp;
  gp.n_predict = 64;
  gp.stop_at_eog = false;
  for (size_t c : {size_t{0}, size_t{1}}) {
    Session plain(*target, cpu, sp);
    Sampler s1(greedy_params());
    const auto ref = generate(plain, tok, s1, refs[c].ids, gp);
    Session ts(*target, cpu, sp), ds(*draft, cpu, sp);
    SpeculativeParams spp;
    spp.adaptive = false;
    spp.n_draft = 3;
    spp.catch_up_window = 0;
    SpeculativeDecoder dec(ts, tok, ds, tok, spp);
    Sampler s2(greedy_params());
    const auto got = dec.generate(tok, s2, refs[c].ids, gp);
    EXPECT_EQ(got.ids, ref.ids) << "prompt " << c;
    EXPECT_EQ(ts.n_past(), static_cast<int32_t>(refs[c].ids.size() + got.ids.size() - 1));
    // A fully accepted round leaves its last draft unevaluated by the draft: with window 0 it is
    // skipped for good, so the draft trails the target by one position per such round.
    EXPECT_LE(ds.n_past(), ts.n_past());
    std::printf("[ spec ] window 0, prompt %zu: draft %d positions behind the target, acceptance %.1f%%\n", c,
                ts.n_past() - ds.n_past(), 100 * dec.stats().acceptance_rate());
  }
}

TEST(SpeculativeGreedy, SelfDraftAcceptsEveryDraft) {
  const char* path = "qwen3-xs/qwen3-xs-f16.gguf";
  auto f = open_fixture(path);
  if (!f) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  CpuBackend cpu(2);
  auto model = models::load(f, cpu);
  const auto tok = tokenizer::Tokenizer::from_gguf(*f);
  SessionParams sp;
  sp.n_ctx = 256;
  GenerateParams gp;
  gp.n_predict = 48;
  gp.stop_at_eog = false;
  for (const char* text : {"def fibonacci(n):\n    ", "import os\nimport sys\n\n\nclass Config:\n"}) {
    const auto prompt = tok.encode(text, false);
    Session plain(*model, cpu, sp);
    Sampler s1(greedy_params());
    const auto ref = generate(plain, tok, s1, prompt, gp);
    for (bool adaptive : {false, true}) {
      Session ts(*model, cpu, sp), ds(*model, cpu, sp);
      SpeculativeParams spp;
      spp.n_draft = 5;
      spp.n_draft_min = 1;  // a self-draft never pays; make it draft anyway
      spp.adaptive = adaptive;
      SpeculativeDecoder dec(ts, tok, ds, tok, spp);
      Sampler s2(greedy_params());
      const auto got = dec.generate(tok, s2, prompt, gp);
      EXPECT_EQ(got.ids, ref.ids) << text;
      const SpeculativeStats& st = dec.stats();
      EXPECT_GT(st.n_drafted, 0);
      EXPECT_EQ(st.n_accepted, st.n_drafted);
      EXPECT_DOUBLE_EQ(st.acceptance_rate(), 1.0);
      EXPECT_LT(st.n_rounds, static_cast<int64_t>(got.ids.size()) - 1);  // fewer target passes than tokens
      std::printf("[ spec ] self-draft %s: %lld rounds for %zu tokens, mean depth %.2f\n", adaptive ? "adaptive" : "fixed",
                  static_cast<long long>(st.n_rounds), got.ids.size(), st.mean_draft_depth());
    }
  }
}

// A copy of a fixture GGUF whose `tokenizer.ggml.tokens` has token `id` renamed to `text`.
std::filesystem::path with_token_renamed(const gguf::File& src, int32_t id, const std::string& text,
                                         const std::string& name) {
  gguf::Writer w;
  w.copy_kvs(src);
  auto views = src.get_string_array("tokenizer.ggml.tokens");
  std::vector<std::string> tokens(views.begin(), views.end());
  tokens.at(static_cast<size_t>(id)) = text;
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  for (const auto& t : src.tensors()) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  auto path = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".gguf");
  w.write(path);
  return path;
}

TEST(SpeculativeVocab, SameVocabularyIsAccepted) {
  auto a = open_fixture(kTarget), b = open_fixture(kDraft);
  if (!a || !b) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  EXPECT_NO_THROW(check_draft_vocab(tokenizer::Tokenizer::from_gguf(*a), tokenizer::Tokenizer::from_gguf(*b)));
}

TEST(SpeculativeVocab, ADifferentTokenTextIsRefusedNamingTheIdAndBothTexts) {
  auto src = open_fixture("qwen3-xs/qwen3-xs-f16.gguf");
  if (!src) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const auto tok = tokenizer::Tokenizer::from_gguf(*src);
  ASSERT_EQ(tok.token_text(1), "<|im_start|>");
  // A control token: renaming it leaves the BPE merges valid, so the file still loads.
  const auto path = with_token_renamed(*src, 1, "<|im_begin|>", "minfer-spec-vocab");
  const gguf::File mod(path);
  const auto mtok = tokenizer::Tokenizer::from_gguf(mod);
  std::filesystem::remove(path);
  ASSERT_EQ(mtok.n_vocab(), tok.n_vocab());
  try {
    check_draft_vocab(tok, mtok);
    ADD_FAILURE() << "a draft with another token text was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("vocabular"), std::string::npos) << m;
    EXPECT_NE(m.find("token id 1:"), std::string::npos) << m;
    EXPECT_NE(m.find("<|im_start|>"), std::string::npos) << m;
    EXPECT_NE(m.find("<|im_begin|>"), std::string::npos) << m;
  }
  // The decoder's tokenizer overload runs the same check.
  CpuBackend cpu(1);
  auto model = models::load(src, cpu);
  SessionParams sp;
  sp.n_ctx = 32;
  Session a(*model, cpu, sp), b(*model, cpu, sp);
  EXPECT_THROW(SpeculativeDecoder(a, tok, b, mtok), std::invalid_argument);
  EXPECT_NO_THROW(SpeculativeDecoder(a, tok, b, tok));
}

TEST(SpeculativeVocab, ADifferentSizeOrEndOfGenerationIsRefused) {
  auto small = open_fixture("qwen3-xs/qwen3-xs-f16.gguf"), real = open_fixture("tokenizer/qwen-vocab.gguf");
  if (!small || !real) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  const auto tok = tokenizer::Tokenizer::from_gguf(*small);
  const auto qwen = tokenizer::Tokenizer::from_gguf(*real);  // the real Qwen vocabulary, 151936 tokens
  ASSERT_NE(qwen.n_vocab(), tok.n_vocab());
  for (auto [t, d] : {std::pair{&tok, &qwen}, std::pair{&qwen, &tok}}) {
    try {
      check_draft_vocab(*t, *d);
      ADD_FAILURE() << "vocabularies of different sizes were accepted";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::to_string(tok.n_vocab()) + " tokens"), std::string::npos) << m;
      EXPECT_NE(m.find(std::to_string(qwen.n_vocab()) + " tokens"), std::string::npos) << m;
      EXPECT_NE(m.find("vocabular"), std::string::npos) << m;
    }
  }
  // Same tokens, another end-of-sequence id.
  tokenizer::Vocab v = tok.vocab();
  ASSERT_NE(v.eos_id, 1);
  v.eos_id = 1;
  const tokenizer::Tokenizer other_eos(v);
  EXPECT_THROW(check_draft_vocab(tok, other_eos), std::invalid_argument);
}

}  // namespace
}  // namespace minfer::test
