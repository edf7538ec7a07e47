// Scheduler: continuous batching of many generation requests over one ModelRunner.
//
// Each step() runs ONE forward pass for every running sequence: first the decode token of each
// sequence that is generating (one row each, with logits), then chunks of the prompts still being
// evaluated, oldest first, until the step's token budget (n_batch) is spent — chunked prefill, as
// vLLM's scheduler and llama-server's slots do. After the pass each sequence samples from its own
// row with its own Sampler and stop rules (TokenSink: end-of-generation tokens, stop strings,
// n_predict, the context), streams its text, and finished sequences retire: their KV blocks go
// back to the pool at once. Rows of a large vocabulary are drawn in parallel, on threads the
// scheduler starts once and keeps (a cpu::ThreadPool), with the tokens of a serial loop. Requests wait in FIFO order and are admitted between steps while a
// sequence slot is free and the pool holds their prompt's blocks.
//
// A request with n_choices > 1 evaluates its prompt once; the sequence is then forked
// (KvCache::seq_fork: the prompt's blocks are shared, copy on write) and each choice samples on
// its own. When a generating sequence needs a new block and the pool is empty, the most recently
// admitted other sequence is preempted: its blocks are freed and it goes back to the head of the
// queue, to be recomputed from its tokens later (vLLM's recompute preemption); its output is not
// changed by that. Cancelled requests retire at the next step.
//
// Prefix caching (on by default, SchedulerParams::prefix_cache): every full KV block a sequence
// evaluates is registered under a hash of its WHOLE token prefix (a chain: the previous block's
// hash and this block's tokens, as vLLM's automatic prefix caching), so a block stands for the
// same keys and values wherever it is found. At admission a new sequence takes the longest run
// of cached blocks matching its prompt (KvCache::seq_append_cached: shared with running
// sequences, or revived from the pool's cached free blocks, which the pool evicts least recently
// used first) and evaluates only the rest; the last prompt token is always evaluated, for its
// logits. A preempted sequence finds its own blocks again the same way when it is recomputed.
//
// Deadlines: a request past Request::deadline ends at the next step like a cancelled one, but
// keeps what it generated (stop_reason "timeout", RequestResult::timed_out).
//
// Greedy output of a sequence does not depend on what else runs with it: on the CPU every op is
// batch-invariant (runtime/speculative.h says why), so it is bit-identical to running it alone;
// on CUDA that holds while a step stays in the decode kernels (docs/batching.md).
//
// Not thread-safe: one thread calls submit/cancel/step (the server serializes around it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/generate.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

class TokenSink;
namespace cpu {
class ThreadPool;
}

struct SchedulerParams {
  int32_t n_batch = 0;       ///< token budget of one step; 0: the runner's n_batch
  int32_t n_parallel = 0;    ///< sequences running at once; 0: the KV cache's n_seq_max
  bool prefix_cache = true;  ///< register full blocks by content and reuse them (see above)
};

/// One generation request.
struct Request {
  /// Tokens to evaluate: the prompt, or a continuation of `seq`'s tokens. Must not be empty.
  std::vector<int32_t> prompt;
  GenerateParams params;
  SamplerParams sampling;     ///< used unless `sampler` is set
  Sampler* sampler = nullptr; ///< borrowed: the caller's sampler (history and RNG carry over)
  int32_t n_choices = 1;      ///< independent completions of the one prompt (forked sequences)
  /// -1: a new KV sequence, freed when the request ends. >= 0: an existing sequence of the runner
  /// whose tokens precede `prompt` (multi-turn chat); it stays with its caller afterwards and
  /// holds every evaluated token (the last sampled token is not evaluated).
  int32_t seq = -1;
  /// Reuse cached blocks of this prompt (llama-server's per-request "cache_prompt"); only with
  /// SchedulerParams::prefix_cache. The request's own full blocks are registered either way.
  bool cache_prompt = true;
  /// >= 0: every sampled token's log-probability and this many alternatives (TokenLogprob, in
  /// GenerateResult::logprobs and on_token); -1: none.
  int32_t n_logprobs = -1;
  /// When set, the request ends at the first step after this time (stop_reason "timeout").
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// Streamed text of choice i (whole UTF-8 characters; stop strings held back).
  std::function<void(int32_t choice, std::string_view text)> on_text;
  /// Every token committed to choice i, after the text it completes went to on_text; `lp` is its
  /// log-probability entry when n_logprobs >= 0, else null.
  std::function<void(int32_t choice, int32_t token, const TokenLogprob* lp)> on_token;
};

using RequestId = int64_t;

struct RequestResult {
  std::vector<GenerateResult> choices;
  bool cancelled = false;
  bool timed_out = false;  ///< ended by Request::deadline (the choices keep what they generated)
  std::string error;  ///< why the request ended without finishing (empty when it finished)
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t prompt_tokens = 0;     ///< prompt tokens evaluated
  int64_t cached_tokens = 0;     ///< tokens taken from the prefix cache instead of evaluated
  int64_t generated_tokens = 0;  ///< tokens sampled
  int64_t preemptions = 0;
  int64_t max_batch_rows = 0;
  int64_t requests_finished = 0;  ///< every request that ended, whatever ended it
  int64_t requests_cancelled = 0;
  int64_t requests_timed_out = 0;
  // Host wall time of step()'s phases around the forward pass, summed (seconds); the forward's
  // own split is ModelRunner::times().
  double plan_s = 0;     ///< retiring, admitting, choosing the batch
  double sample_s = 0;   ///< drawing every row's token
  double commit_s = 0;   ///< detokenizing, stop rules, callbacks, retiring finished sequences
};

class Scheduler {
 public:
  Scheduler(ModelRunner& runner, const tokenizer::Tokenizer& tok, const SchedulerParams& p = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Queues a request. Throws std::invalid_argument for an empty prompt, n_choices < 1, a token
  /// id outside the vocabulary or a `seq` that does not exist, and ContextFullError when the
  /// prompt (after seq's tokens) does not fit one sequence's context or the whole pool.
  RequestId submit(Request r);
  /// Ends a request at the next step (its sequences retire, result().cancelled is set). Unknown or
  /// finished ids are ignored.
  void cancel(RequestId id);

  /// One forward pass over all running sequences (admitting waiting requests first). Returns
  /// false, doing nothing, when no request is waiting or running.
  bool step();
  /// step() until every request has finished.
  void run();

  bool finished(RequestId id) const;
  /// The result of a finished request, removed from the scheduler. Throws std::logic_error for an
  /// unknown or unfinished id.
  RequestResult take(RequestId id);

  /// Sequences running (a request with n choices runs up to n).
  int32_t n_running() const;
  /// Requests with at least one running sequence.
  int32_t n_running_requests() const;
  /// Requests waiting for admission (new, or with a preempted sequence).
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool prefix_cache() const { return prefix_cache_; }
  const SchedulerStats& stats() const { return stats_; }
  /// Threads besides the stepping one that sample rows in parallel: 0 until a step first draws
  /// several rows of a vocabulary of 8k or more, then min(hardware threads, n_parallel) - 1 for
  /// the scheduler's life (the same threads every step).
  int32_t n_sampling_threads() const;
  ModelRunner& runner() { return runner_; }

 private:
  struct Req;
  struct Seq;
  bool admit(Req& r);
  int32_t reuse_prefix(Seq& s);
  void register_blocks(Seq& s);
  std::vector<Seq*> start_choices(Req& r, Seq& parent);
  bool commit(Seq& s, int32_t token, std::span<const float> row);
  void end_early(Req& r, bool timeout);
  void retire(Seq& s);
  void finish_request(Req& r);
  bool preempt_for(const Seq& needy);
  void fail(Req& r, const std::string& why);

  ModelRunner& runner_;
  const tokenizer::Tokenizer& tok_;
  int32_t n_batch_ = 0, n_parallel_ = 0;
  bool prefix_cache_ = true;
  RequestId next_id_ = 1;
  std::unordered_map<RequestId, std::unique_ptr<Req>> reqs_;
  std::deque<Req*> waiting_;
  std::list<Seq*> running_;  // admission order
  SchedulerStats stats_;
  // Threads that draw a step's rows in parallel (large vocabularies, distinct samplers): started
  // by the first step that needs them, joined by the destructor.
  std::unique_ptr<cpu::ThreadPool> sample_pool_;
};

}  // namespace minfer
