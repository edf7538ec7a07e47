// Continuous batching on the fixture models (CPU): sequences admitted and finished at different
// steps give exactly what each gives alone — 16 greedy sequences against plain solo generation,
// and a randomized run of admissions, cancellations, forks (sampled choices that diverge, so a
// broken copy-on-write shows) and preemptions over a small pool, checked against solo runs and
// ending with every KV block free.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "common/test_util.h"
#include "text_model.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/generate.h"
#include "runtime/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {
namespace {

#define LOAD_OR_SKIP(L, path) LOAD_TEXT_MODEL_OR_SKIP(L, path, 200000)

TEST(Scheduler, SixteenGreedySequencesEqualTheirSoloRuns) {
  LOAD_OR_SKIP(L, "qwen3-s/qwen3-s-Q4_K_M.gguf");
  struct Job {
    std::vector<int32_t> prompt;
    int32_t n_predict;
    RequestId id = 0;
  };
  std::vector<Job> jobs;
  for (int i = 0; i < 16; ++i) jobs.push_back({L.random_prompt(3, 150), static_cast<int32_t>(rand_int(4, 40))});
  auto request = [](const Job& j) {
    Request r;
    r.prompt = j.prompt;
    r.params.n_predict = j.n_predict;
    r.params.stop_at_eog = false;
    r.sampling.temp = 0;
    return r;
  };
  RunnerParams rp;
  rp.n_seq_max = 16;
  rp.n_ctx = 16 * 256;
  rp.n_batch = 64;  // prompts are chunked and share steps with decoding sequences
  ModelRunner runner(*L.model, L.cpu, rp);
  Scheduler sched(runner, *L.tok);
  std::map<RequestId, std::string> streamed;
  size_t submitted = 0;
  for (; submitted < 6; ++submitted) jobs[submitted].id = sched.submit(request(jobs[submitted]));
  // The rows are drawn on the scheduler's own threads (the vocabulary is 8k or more): started by
  // the first step that draws several rows, the same ones every later step — between steps the
  // process keeps exactly as many threads.
  ASSERT_GE(L.tok->n_vocab(), 8192);
  EXPECT_EQ(sched.n_sampling_threads(), 0);
  auto process_threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator{});
  };
  std::optional<std::ptrdiff_t> threads_then;
  while (sched.step()) {
    if (submitted < jobs.size()) jobs[submitted].id = sched.submit(request(jobs[submitted])), ++submitted;
    if (sched.n_sampling_threads() == 0) continue;
    if (!threads_then) threads_then = process_threads();
    ASSERT_EQ(process_threads(), *threads_then) << "threads started or ended between steps";
  }
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(sched.n_sampling_threads(), std::min(hw, 16) - 1);
  EXPECT_GT(sched.stats().max_batch_rows, 16);
  for (const Job& j : jobs) {
    ASSERT_TRUE(sched.finished(j.id));
    const RequestResult got = sched.take(j.id);
    ASSERT_TRUE(got.error.empty()) << got.error;
    Session solo(*L.model, L.cpu, {.n_ctx = 256});
    Sampler greedy({.temp = 0});
    GenerateParams gp;
    gp.n_predict = j.n_predict;
    gp.stop_at_eog = false;
    const GenerateResult want = generate(solo, *L.tok, greedy, j.prompt, gp);
    EXPECT_EQ(got.choices[0].ids, want.ids) << "prompt of " << j.prompt.size() << " tokens (seed " << seed() << ")";
    EXPECT_EQ(got.choices[0].stop_reason, "length");
    EXPECT_EQ(got.choices[0].n_prompt_eval, static_cast<int32_t>(j.prompt.size()));
  }
  EXPECT_EQ(runner.kv().pool().n_used(), 0);
  EXPECT_EQ(runner.kv().n_seq(), 0);
}

// The server's warm-up runs throwaway sequences through the runner: afterwards the sequences that
// existed before hold what they held (their next logits bit for bit what a runner that never
// warmed up computes), and the pool and the sequence slots are as they were.
TEST(ModelRunner, WarmupFreesItsSequencesAndChangesNoResult) {
  LOAD_OR_SKIP(L, "qwen3-s/qwen3-s-Q4_K_M.gguf");
  RunnerParams rp;
  rp.n_seq_max = 6;
  rp.n_ctx = 6 * 128;
  rp.n_batch = 48;
  rp.block_size = 16;
  const std::vector<int32_t> prompt = L.random_prompt(5, 40);
  const int32_t next = prompt.front();
  auto logits_after = [&](bool warm) {
    ModelRunner runner(*L.model, L.cpu, rp);
    const int32_t s = runner.kv().seq_new();
    std::vector<BatchToken> batch;
    for (int32_t t : prompt) batch.push_back({s, t, false});
    runner.decode(batch);
    const int32_t used = runner.kv().pool().n_used();
    if (warm) {
      runner.warmup(40);  // more rows than free slots: capped at the 5 free ones
      EXPECT_EQ(runner.kv().n_seq(), 1);
      EXPECT_EQ(runner.kv().pool().n_used(), used);
      EXPECT_EQ(runner.kv().seq_len(s), static_cast<int32_t>(prompt.size()));
    }
    const BatchToken one{s, next, true};
    const auto out = runner.decode(std::span<const BatchToken>(&one, 1));
    return std::vector<float>(out.begin(), out.end());
  };
  const std::vector<float> cold = logits_after(false), warm = logits_after(true);
  ASSERT_EQ(cold.size(), warm.size());
  for (float v : warm) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(std::memcmp(cold.data(), warm.data(), cold.size() * sizeof(float)), 0);
}

// The randomized run, with the prefix cache off (each preempted sequence is recomputed token by
// token) or on (preempted sequences find their blocks again, requests share prompt blocks).
void random_run(TextModel& L, bool prefix_cache) {
  struct Job {
    Request req;
    RequestId id = 0;
    bool cancelled = false;
    std::vector<std::string> streamed;
  };
  auto make_request = [&](uint64_t seed) {
    Request r;
    r.prompt = L.random_prompt(2, 60);
    r.params.n_predict = static_cast<int32_t>(rand_int(1, 40));
    r.params.stop_at_eog = rand_int(0, 1) == 1;
    r.n_choices = static_cast<int32_t>(rand_int(1, 3));
    if (rand_int(0, 1)) r.sampling.temp = 0;
    else r.sampling.temp = 0.9f, r.sampling.top_k = 0, r.sampling.top_p = 1, r.sampling.min_p = 0;
    r.sampling.seed = seed;
    return r;
  };
  RunnerParams rp;
  rp.n_seq_max = 8;
  rp.n_ctx = 256;  // 16 blocks of 16 for up to 8 sequences of up to 100 tokens: preemption happens
  rp.n_ctx_seq = 128;
  rp.n_batch = 32;
  rp.block_size = 16;
  ModelRunner runner(*L.model, L.cpu, rp);
  Scheduler sched(runner, *L.tok, {.prefix_cache = prefix_cache});
  std::vector<std::unique_ptr<Job>> jobs;
  // Requests keep arriving until the run has taken `target` steps (a fixed number of arrivals
  // gave anywhere from ~970 to ~1,200 steps depending on the seed), then the rest drains.
  const int64_t target = prefix_cache ? 500 : 1000;
  int64_t steps = 0;
  while (steps < target || sched.n_running() + sched.n_waiting() > 0) {
    if (steps < target && rand_int(0, 1) == 0) {
      auto j = std::make_unique<Job>();
      j->req = make_request(static_cast<uint64_t>(rand_int(1, 1 << 30)));
      j->streamed.resize(static_cast<size_t>(j->req.n_choices));
      Request r = j->req;
      Job* jp = j.get();
      r.on_text = [jp](int32_t c, std::string_view s) { jp->streamed[static_cast<size_t>(c)] += s; };
      j->id = sched.submit(std::move(r));
      jobs.push_back(std::move(j));
    }
    if (!jobs.empty() && rand_int(0, 19) == 0) {
      Job& j = *jobs[static_cast<size_t>(rand_int(0, static_cast<int64_t>(jobs.size()) - 1))];
      if (!sched.finished(j.id)) {
        sched.cancel(j.id);
        j.cancelled = true;
      }
    }
    if (sched.step()) ++steps;
  }
  EXPECT_GE(steps, target);
  EXPECT_GT(sched.stats().preemptions, 0) << "the pool was never short: the test lost its point";
  if (prefix_cache) {
    EXPECT_GT(sched.stats().cached_tokens, 0) << "no preempted sequence found its blocks again";
  }
  std::printf("%lld steps, %lld preemptions, %lld tokens from the prefix cache\n", static_cast<long long>(steps),
              static_cast<long long>(sched.stats().preemptions), static_cast<long long>(sched.stats().cached_tokens));
  EXPECT_EQ(runner.kv().pool().n_used(), 0);
  EXPECT_EQ(runner.kv().n_seq(), 0);
  int checked = 0;
  for (auto& j : jobs) {
    ASSERT_TRUE(sched.finished(j->id));
    const RequestResult got = sched.take(j->id);
    if (j->cancelled) {
      EXPECT_TRUE(got.cancelled);
      continue;
    }
    ASSERT_TRUE(got.error.empty()) << got.error;
    // The same request alone, with room to spare.
    RunnerParams solo_p = rp;
    solo_p.n_ctx = 1024;
    ModelRunner solo_runner(*L.model, L.cpu, solo_p);
    Scheduler solo(solo_runner, *L.tok, {.prefix_cache = false});
    const RequestId id = solo.submit(j->req);
    solo.run();
    const RequestResult want = solo.take(id);
    ASSERT_EQ(got.choices.size(), want.choices.size());
    for (size_t c = 0; c < got.choices.size(); ++c) {
      EXPECT_EQ(got.choices[c].ids, want.choices[c].ids) << "request " << j->id << " choice " << c << " (seed " << seed() << ")";
      EXPECT_EQ(got.choices[c].stop_reason, want.choices[c].stop_reason);
      EXPECT_EQ(got.choices[c].text, j->streamed[c]);
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

// -c past the trained context: one sequence may use all of it (llama-bench -d 32768 on a 32k
// model); with several, each stops at context_length unless n_ctx_seq says otherwise.
TEST(Scheduler, OneSequenceTakesTheWholeContextSeveralStopAtTheTrainedOne) {
  LOAD_OR_SKIP(L, "qwen3-xs/qwen3-xs-f16.gguf");
  const int32_t train = L.model->hparams().n_ctx_train;
  RunnerParams rp;
  rp.n_ctx = train + 96;
  rp.n_batch = 16;
  ModelRunner one(*L.model, L.cpu, rp);
  EXPECT_EQ(one.kv().n_ctx_seq(), train + 96);
  rp.n_seq_max = 2;
  ModelRunner two(*L.model, L.cpu, rp);
  EXPECT_EQ(two.kv().n_ctx_seq(), train);
  rp.n_ctx_seq = train + 32;
  ModelRunner asked(*L.model, L.cpu, rp);
  EXPECT_EQ(asked.kv().n_ctx_seq(), train + 32);
}

TEST(Scheduler, RandomAdmitCancelForkAndPreemptMatchSoloRunsAndFreeEveryBlock) {
  LOAD_OR_SKIP(L, "qwen3-xs/qwen3-xs-f16.gguf");
  random_run(L, false);
}

TEST(Scheduler, RandomRunWithThePrefixCacheMatchesSoloRunsAndFreesEveryBlock) {
  LOAD_OR_SKIP(L, "qwen3-xs/qwen3-xs-f16.gguf");
  random_run(L, true);
}

}  // namespace
}  // namespace minfer::test
