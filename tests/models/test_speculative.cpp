// Speculative decoding on the fixture models: greedy output is identical to plain greedy decoding
// (the pair: qwen3-s Q4_K_M verified, qwen3-xs Q8_0 drafting, on the 5 prompts of
// qwen3-s/refs.json); a draft equal to the target is always accepted; a draft whose vocabulary
// differs is refused. (The acceptance rule and the depth policy alone: tests/runtime.)
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <unistd.h>

#include <filesystem>

#include "common/stats.h"
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

// The pair (target, draft, their tokenizers) on a 2-thread CPU backend, with the qwen3-s
// references. load() is false when the fixtures are absent.
struct FixturePair {
  std::shared_ptr<const gguf::File> tf, df;
  std::vector<RefCase> refs;
  CpuBackend cpu{2};
  std::unique_ptr<Model> target, draft;
  std::optional<tokenizer::Tokenizer> tok, dtok;

  bool load() {
    tf = open_fixture(kTarget);
    df = open_fixture(kDraft);
    refs = load_refs("qwen3-s");
    if (!tf || !df || refs.empty()) return false;
    target = models::load(tf, cpu);
    draft = models::load(df, cpu);
    tok.emplace(tokenizer::Tokenizer::from_gguf(*tf));
    dtok.emplace(tokenizer::Tokenizer::from_gguf(*df));
    return true;
  }
};

#define LOAD_PAIR_OR_SKIP(P) \
  FixturePair P;             \
  if (!P.load()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir()

TEST(SpeculativeGreedy, IdenticalToPlainGreedyOnTheReferencePrompts) {
  LOAD_PAIR_OR_SKIP(P);
  const auto& refs = P.refs;
  ASSERT_EQ(refs.size(), 5u);
  auto& cpu = P.cpu;
  const auto& target = P.target;
  const auto& draft = P.draft;
  const auto& tok = *P.tok;
  const auto& dtok = *P.dtok;
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
      if (!adaptive) spp.n_draft = 4;  // adaptive: the default, the backend's invariant depth
      spp.n_draft_min = adaptive ? 0 : 1;
      SpeculativeDecoder dec(ts, tok, ds, dtok, spp);
      EXPECT_EQ(dec.params().n_draft, adaptive ? default_draft_max(cpu) : 4);
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
  LOAD_PAIR_OR_SKIP(P);
  const auto& refs = P.refs;
  auto& cpu = P.cpu;
  const auto& target = P.target;
  const auto& draft = P.draft;
  const auto& tok = *P.tok;
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

TEST(SpeculativeSampled, TokensFollowThePlainSamplingDistribution) {
  // End to end at temperature 1, top-k 40: the tokens a speculative round commits must be
  // distributed like plain sampling's. Tokens 2 and 3 come from the first verify round (token 1
  // from the prompt's logits). 1500 seeded runs each, two-sample chi-square, p > 0.01.
  LOAD_PAIR_OR_SKIP(P);
  const auto& refs = P.refs;
  auto& cpu = P.cpu;
  const auto& target = P.target;
  const auto& draft = P.draft;
  const auto& tok = *P.tok;
  SessionParams sp;
  sp.n_ctx = 64;
  GenerateParams gp;
  gp.n_predict = 3;
  gp.stop_at_eog = false;
  SamplerParams sampled;
  sampled.temp = 1.0f;
  sampled.top_k = 40;
  sampled.top_p = 1.0f;
  sampled.min_p = 0.0f;
  // The prompt but its last token is evaluated once; each run rolls back to it and feeds the
  // last token, so a run costs one round, not a prefill.
  const auto& ids = refs[1].ids;
  const std::vector<int32_t> head(ids.begin(), ids.end() - 1), last(ids.end() - 1, ids.end());
  const auto n_head = static_cast<int32_t>(head.size());
  Session plain(*target, cpu, sp), ts(*target, cpu, sp), ds(*draft, cpu, sp);
  plain.eval(head);
  ts.eval(head);
  ds.eval(head);
  SpeculativeParams spp;
  spp.adaptive = false;
  spp.n_draft = 2;
  SpeculativeDecoder dec(ts, tok, ds, tok, spp);
  std::map<int32_t, int64_t> spec2, spec3, plain2, plain3;
  constexpr int kRuns = 1500;
  for (int i = 0; i < kRuns; ++i) {
    sampled.seed = static_cast<uint64_t>(1000 + i);
    Sampler s1(sampled);
    plain.rollback(n_head);
    const auto a = generate(plain, tok, s1, last, gp);
    sampled.seed = static_cast<uint64_t>(900000 + i);
    Sampler s2(sampled);
    ts.rollback(n_head);
    ds.rollback(n_head);
    const auto b = dec.generate(tok, s2, last, gp);
    ASSERT_EQ(a.ids.size(), 3u);
    ASSERT_EQ(b.ids.size(), 3u);
    ++plain2[a.ids[1]], ++plain3[a.ids[2]], ++spec2[b.ids[1]], ++spec3[b.ids[2]];
  }
  int df2 = 0, df3 = 0;
  const double p2 = chi2_homogeneity_p(spec2, plain2, 20, &df2), p3 = chi2_homogeneity_p(spec3, plain3, 20, &df3);
  std::printf("[ spec ] sampled, %d runs: token 2 p = %.3g (df %d), token 3 p = %.3g (df %d), acceptance %.1f%%\n", kRuns, p2,
              df2, p3, df3, 100 * dec.stats().acceptance_rate());
  EXPECT_GT(df2, 3);
  EXPECT_GT(p2, 0.01) << "token 2 of speculative sampling is not distributed like plain sampling";
  EXPECT_GT(p3, 0.01) << "token 3 of speculative sampling is not distributed like plain sampling";
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

// A copy of a fixture model with `extra` padding tokens appended ("[PAD<i>]", type unused) and
// as many zero rows appended to token_embd (a tied output reads the same rows): the shape of
// Qwen2.5 vocabularies padded to different sizes.
std::filesystem::path with_padding(const gguf::File& src, int32_t extra, const std::string& name,
                                   std::vector<std::vector<uint8_t>>& keep_alive) {
  gguf::Writer w;
  w.copy_kvs(src);
  auto views = src.get_string_array("tokenizer.ggml.tokens");
  std::vector<std::string> tokens(views.begin(), views.end());
  auto types = src.get_array<int32_t>("tokenizer.ggml.token_type");
  for (int32_t i = 0; i < extra; ++i) {
    tokens.push_back("[PAD" + std::to_string(i) + "]");
    types.push_back(5);  // llama.cpp's LLAMA_TOKEN_TYPE_UNUSED
  }
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_array("tokenizer.ggml.token_type", types);
  for (const auto& t : src.tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (t.name == "token_embd.weight" || t.name == "output.weight") {
      auto& buf = keep_alive.emplace_back(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.nbytes);
      buf.resize(t.nbytes + static_cast<size_t>(extra) * (t.nbytes / static_cast<size_t>(ne[1])), 0);
      ne[1] += extra;
      w.add_tensor(t.name, t.type, ne, buf.data());
    } else {
      w.add_tensor(t.name, t.type, ne, t.data);
    }
  }
  auto path = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".gguf");
  w.write(path);
  return path;
}

TEST(SpeculativeVocab, PaddedVocabulariesPairAndKeepTheOutput) {
  // A draft whose vocabulary is the target's plus 64 padding entries (and the reverse) is
  // accepted, as llama.cpp accepts up to 128; greedy and sampled output stay the target's.
  LOAD_PAIR_OR_SKIP(P);
  const auto& refs = P.refs;
  auto& cpu = P.cpu;
  const auto& target = P.target;
  const auto& draft = P.draft;
  const auto& tok = *P.tok;
  std::vector<std::vector<uint8_t>> bufs;
  const auto padded_path = with_padding(*P.df, 64, "minfer_padded_draft", bufs);
  auto pf = std::make_shared<const gguf::File>(padded_path.string());
  auto padded = models::load(pf, cpu);
  const auto ptok = tokenizer::Tokenizer::from_gguf(*pf);
  ASSERT_EQ(ptok.n_vocab(), tok.n_vocab() + 64);
  ASSERT_EQ(padded->hparams().n_vocab, target->hparams().n_vocab + 64);
  SessionParams sp;
  sp.n_ctx = 128;
  GenerateParams gp;
  gp.n_predict = 32;
  gp.stop_at_eog = false;
  struct Case {
    const Model* t;
    const tokenizer::Tokenizer* tt;
    const Model* d;
    const tokenizer::Tokenizer* dt;
    const char* what;
  };
  const auto& dtok = *P.dtok;
  for (const Case& k : {Case{target.get(), &tok, padded.get(), &ptok, "padded draft"},
                        Case{padded.get(), &ptok, draft.get(), &dtok, "padded target"}}) {
    for (float temp : {0.0f, 0.8f}) {
      SamplerParams spar;
      spar.temp = temp;
      spar.seed = 7;
      Session plain(*k.t, cpu, sp);
      Sampler s1(spar);
      const auto ref = generate(plain, *k.tt, s1, refs[0].ids, gp);
      Session ts(*k.t, cpu, sp), ds(*k.d, cpu, sp);
      SpeculativeParams spp;
      spp.adaptive = false;
      spp.n_draft = 3;
      SpeculativeDecoder dec(ts, *k.tt, ds, *k.dt, spp);
      Sampler s2(spar);
      const auto got = dec.generate(*k.tt, s2, refs[0].ids, gp);
      ASSERT_EQ(got.ids.size(), 32u) << k.what;
      for (int32_t id : got.ids) EXPECT_LT(id, tok.n_vocab()) << k.what << ": a padding id was committed";
      if (temp == 0.0f) {
        EXPECT_EQ(got.ids, ref.ids) << k.what;
      }
      EXPECT_GT(dec.stats().n_accepted, 0) << k.what << ": the shared ids must still be accepted";
    }
  }
  std::filesystem::remove(padded_path);
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
