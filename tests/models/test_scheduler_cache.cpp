// The scheduler's extensions for serving (CPU, the small fixture): prefix caching reuses whole
// blocks of an earlier prompt and changes no output; per-request and global switches turn it off;
// log-probabilities are those of the logits row; a deadline ends a request and keeps its text.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/test_util.h"
#include "text_model.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/scheduler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {
namespace {

#define LOAD_OR_SKIP(F) LOAD_TEXT_MODEL_OR_SKIP(F, "qwen3-xs/qwen3-xs-f16.gguf", 100000)

RunnerParams small_runner() {
  RunnerParams rp;
  rp.n_seq_max = 4;
  rp.n_ctx = 1024;
  rp.n_batch = 64;
  rp.block_size = 16;
  return rp;
}

Request greedy(std::vector<int32_t> prompt, int32_t n_predict) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.n_predict = n_predict;
  r.params.stop_at_eog = false;
  r.sampling.temp = 0;
  return r;
}

RequestResult run_one(Scheduler& s, Request r) {
  const RequestId id = s.submit(std::move(r));
  s.run();
  return s.take(id);
}

// A fresh runner with the cache off: what the request gives with nothing reused.
RequestResult solo(TextModel& F, Request r) {
  ModelRunner runner(*F.model, F.cpu, small_runner());
  Scheduler s(runner, *F.tok, {.prefix_cache = false});
  return run_one(s, std::move(r));
}

TEST(SchedulerPrefixCache, ReusesWholeBlocksOfEarlierPromptsAndChangesNothing) {
  LOAD_OR_SKIP(F);
  ModelRunner runner(*F.model, F.cpu, small_runner());
  Scheduler sched(runner, *F.tok);
  ASSERT_TRUE(sched.prefix_cache());
  const int32_t bs = runner.kv().block_size();
  const auto base = F.slice(rand_int(40, 120));
  const RequestResult a = run_one(sched, greedy(base, 8));
  EXPECT_EQ(a.choices[0].n_prompt_cached, 0);
  // A longer prompt starting with the same tokens: its whole blocks inside `base` come from the
  // cache (A also registered the blocks holding its generated tokens, but those differ from B's).
  auto longer = base;
  const auto tail = F.slice(rand_int(1, 40));
  longer.insert(longer.end(), tail.begin(), tail.end());
  const RequestResult b = run_one(sched, greedy(longer, 8));
  const int32_t want_b = static_cast<int32_t>(base.size()) / bs * bs;
  EXPECT_EQ(b.choices[0].n_prompt_cached, std::min<int32_t>(want_b, (static_cast<int32_t>(longer.size()) - 1) / bs * bs));
  EXPECT_EQ(b.choices[0].n_prompt_eval + b.choices[0].n_prompt_cached, static_cast<int32_t>(longer.size()));
  EXPECT_EQ(b.choices[0].ids, solo(F, greedy(longer, 8)).choices[0].ids) << "seed " << seed();
  // The same prompt again: every whole block but the one holding the last token.
  const RequestResult c = run_one(sched, greedy(base, 8));
  EXPECT_EQ(c.choices[0].n_prompt_cached, (static_cast<int32_t>(base.size()) - 1) / bs * bs);
  EXPECT_EQ(c.choices[0].ids, a.choices[0].ids);
  // A's prompt and output together (a multi-turn chat sends both back): the generated tokens'
  // blocks are reused too.
  auto turn = base;
  turn.insert(turn.end(), a.choices[0].ids.begin(), a.choices[0].ids.end());
  const RequestResult d = run_one(sched, greedy(turn, 4));
  EXPECT_EQ(d.choices[0].n_prompt_cached, (static_cast<int32_t>(turn.size()) - 1) / bs * bs);
  EXPECT_EQ(d.choices[0].ids, solo(F, greedy(turn, 4)).choices[0].ids);
  EXPECT_EQ(sched.stats().cached_tokens,
            b.choices[0].n_prompt_cached + c.choices[0].n_prompt_cached + d.choices[0].n_prompt_cached);
  EXPECT_EQ(runner.kv().pool().n_used(), 0);
  EXPECT_GT(runner.kv().pool().n_cached(), 0);
}

TEST(SchedulerPrefixCache, SharedWithRunningSequencesAndForks) {
  LOAD_OR_SKIP(F);
  ModelRunner runner(*F.model, F.cpu, small_runner());
  Scheduler sched(runner, *F.tok);
  const auto prompt = F.slice(70);
  // Two identical prompts at once and a third, forked into 2 choices, joining later: they share
  // blocks while running; every output equals the uncached run.
  Request forked = greedy(prompt, 12);
  forked.n_choices = 2;
  forked.sampling.temp = 0.9f, forked.sampling.top_k = 0, forked.sampling.top_p = 1, forked.sampling.min_p = 0;
  forked.sampling.seed = 1234;
  const RequestId x = sched.submit(greedy(prompt, 20));
  sched.step();
  sched.step();  // x's prompt is in: its full blocks are registered
  const RequestId y = sched.submit(greedy(prompt, 20));
  const RequestId z = sched.submit(forked);
  sched.run();
  const RequestResult rx = sched.take(x), ry = sched.take(y), rz = sched.take(z);
  EXPECT_EQ(ry.choices[0].n_prompt_cached, 64);
  EXPECT_EQ(rz.choices[0].n_prompt_cached, 64);
  const RequestResult want = solo(F, greedy(prompt, 20));
  EXPECT_EQ(rx.choices[0].ids, want.choices[0].ids);
  EXPECT_EQ(ry.choices[0].ids, want.choices[0].ids);
  const RequestResult want_z = solo(F, forked);
  ASSERT_EQ(rz.choices.size(), 2u);
  EXPECT_EQ(rz.choices[0].ids, want_z.choices[0].ids);
  EXPECT_EQ(rz.choices[1].ids, want_z.choices[1].ids);
  EXPECT_EQ(runner.kv().pool().n_used(), 0);
}

TEST(SchedulerPrefixCache, OffGloballyOrPerRequest) {
  LOAD_OR_SKIP(F);
  const auto prompt = F.slice(80);
  {
    ModelRunner runner(*F.model, F.cpu, small_runner());
    Scheduler sched(runner, *F.tok, {.prefix_cache = false});
    run_one(sched, greedy(prompt, 4));
    EXPECT_EQ(run_one(sched, greedy(prompt, 4)).choices[0].n_prompt_cached, 0);
    EXPECT_EQ(runner.kv().pool().n_cached(), 0) << "nothing is registered when the cache is off";
  }
  ModelRunner runner(*F.model, F.cpu, small_runner());
  Scheduler sched(runner, *F.tok);
  run_one(sched, greedy(prompt, 4));
  Request r = greedy(prompt, 4);
  r.cache_prompt = false;
  EXPECT_EQ(run_one(sched, r).choices[0].n_prompt_cached, 0);
  EXPECT_GT(run_one(sched, greedy(prompt, 4)).choices[0].n_prompt_cached, 0);
}

TEST(SchedulerLogprobs, AreTheLogSoftmaxOfTheLogitsRow) {
  LOAD_OR_SKIP(F);
  ModelRunner runner(*F.model, F.cpu, small_runner());
  Scheduler sched(runner, *F.tok);
  const auto prompt = F.slice(30);
  Request r = greedy(prompt, 6);
  r.n_logprobs = 4;
  std::vector<TokenLogprob> streamed;
  r.on_token = [&](int32_t, int32_t token, const TokenLogprob* lp) {
    ASSERT_NE(lp, nullptr);
    EXPECT_EQ(lp->id, token);
    streamed.push_back(*lp);
  };
  const RequestResult res = run_one(sched, r);
  const GenerateResult& g = res.choices[0];
  ASSERT_EQ(g.logprobs.size(), g.ids.size());
  ASSERT_EQ(streamed.size(), g.ids.size());
  // The reference: the same tokens through a Session, log-softmax in double by hand.
  Session s(*F.model, F.cpu, {.n_ctx = 256});
  std::vector<int32_t> feed = prompt;
  for (size_t i = 0; i < g.ids.size(); ++i) {
    const auto logits = s.eval(feed);
    double mx = -INFINITY, sum = 0;
    for (float v : logits) mx = std::max(mx, static_cast<double>(v));
    for (float v : logits) sum += std::exp(v - mx);
    const double lse = mx + std::log(sum);
    const TokenLogprob& lp = g.logprobs[i];
    EXPECT_EQ(lp.id, g.ids[i]);
    EXPECT_NEAR(lp.logprob, logits[static_cast<size_t>(g.ids[i])] - lse, 1e-4);
    ASSERT_EQ(lp.top.size(), 4u);
    EXPECT_EQ(lp.top[0].first, g.ids[i]) << "greedy picks the most likely token";
    for (size_t k = 1; k < lp.top.size(); ++k) EXPECT_GE(lp.top[k - 1].second, lp.top[k].second);
    for (const auto& [id, l] : lp.top) EXPECT_NEAR(l, logits[static_cast<size_t>(id)] - lse, 1e-4);
    EXPECT_EQ(streamed[i].logprob, lp.logprob);
    feed = {g.ids[i]};
  }
  // Without asking: none.
  EXPECT_TRUE(run_one(sched, greedy(prompt, 3)).choices[0].logprobs.empty());
}

TEST(SchedulerDeadline, EndsTheRequestAndKeepsWhatItGenerated) {
  LOAD_OR_SKIP(F);
  RunnerParams rp = small_runner();
  rp.n_ctx_seq = 1024;
  ModelRunner runner(*F.model, F.cpu, rp);
  Scheduler sched(runner, *F.tok);
  // Past already: ends at the first step, before anything is evaluated.
  Request late = greedy(F.slice(20), -1);
  late.deadline = std::chrono::steady_clock::now();
  const RequestResult a = run_one(sched, late);
  EXPECT_TRUE(a.timed_out);
  EXPECT_FALSE(a.cancelled);
  EXPECT_EQ(a.choices[0].stop_reason, "timeout");
  EXPECT_TRUE(a.choices[0].ids.empty());
  // A deadline mid-generation (generating to the end of the 1024-token context takes far
  // longer): what was generated stays, streamed and in the result.
  Request mid = greedy(F.slice(20), -1);
  std::string text;
  mid.on_text = [&](int32_t, std::string_view s) { text += s; };
  mid.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  const RequestResult m = run_one(sched, mid);
  EXPECT_TRUE(m.timed_out);
  EXPECT_EQ(m.choices[0].stop_reason, "timeout");
  EXPECT_LT(m.choices[0].ids.size(), 1000u);
  EXPECT_EQ(m.choices[0].text, text);
  EXPECT_EQ(sched.stats().requests_timed_out, 2);
  EXPECT_EQ(runner.kv().pool().n_used(), 0);
}

}  // namespace
}  // namespace minfer::test
