// Engine: the server's one thread that owns the ModelRunner and the Scheduler and steps them.
//
// HTTP handler threads never touch the model. A handler builds a Task (one or more prompts, each
// a scheduler Request with its n choices) and hands it to submit(); the engine thread takes new
// tasks between steps, so a request joins the running batch at the next forward pass. During a
// step the scheduler's callbacks append each choice's text and log-probabilities to its Task and
// wake the handler waiting on it; when every prompt of a task has finished, the task is done.
//
// Slots and queue: the scheduler runs up to n_parallel sequences (a request with n choices takes
// n); a task that cannot start now waits in the scheduler's FIFO. submit() refuses a task
// (the handler answers 503 with Retry-After) when the sequences of the tasks in flight, this one
// included, would pass n_parallel + queue.
//
// Cancellation: before every step the engine polls the connection of every task it holds
// (conn.h) and cancels those whose client hung up, and cancel() does the same for a handler that
// saw its writes fail; the scheduler retires them at that step, so their slots and KV blocks
// are free for the next request within one step. A task past its deadline (timeout_s after it
// arrived) ends the same way, keeping what it generated.
//
// The engine never throws into a handler: a failed forward pass fails the tasks that were
// running (error 500) and the engine goes on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/model_runner.h"
#include "runtime/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {

struct EngineParams {
  int32_t n_parallel = 4;    ///< sequences decoded together (-np)
  int32_t queue = 64;        ///< sequences that may wait beyond the running ones (--queue)
  double timeout_s = 0;      ///< per task, from its arrival; <= 0: none
  bool prefix_cache = true;  ///< the scheduler's prefix cache (--no-cache-prompt turns it off)
  /// Before serving, run every decode shape of 1 .. n_parallel rows and a full ubatch once
  /// (ModelRunner::warmup; --no-warmup turns it off, as in llama-server).
  bool warmup = true;
};

/// One HTTP request's generation work, shared by the handler that waits on it and the engine.
class Task {
 public:
  /// Output i of prompt p with n choices each is choices[p * n + i].
  struct Choice {
    std::string text;                    ///< streamed text not taken yet
    std::vector<TokenLogprob> logprobs;  ///< entries not taken yet
    bool done = false;
    GenerateResult result;  ///< valid once done
  };

  /// The prompts: prompt ids, params, sampling, n_choices, n_logprobs, cache_prompt set by the
  /// caller; the engine sets the callbacks and the deadline. Every request has the same n_choices.
  std::vector<Request> requests;
  int fd = -1;  ///< the client's connection (conn.h), polled for a hang-up; -1: none

  int32_t n_choices() const { return requests.empty() ? 0 : requests.front().n_choices; }
  int32_t n_outputs() const { return static_cast<int32_t>(requests.size()) * n_choices(); }

  // ---- filled by the engine; read under mu ----
  mutable std::mutex mu;
  std::condition_variable cv;  ///< notified on new text, a finished choice, the end
  std::vector<Choice> choices;
  bool done = false;
  bool cancelled = false;  ///< ended because its client went away or cancel() was called
  /// Ended by cancel_all() (shutting down) while its client was still there: error_status is
  /// 503 and `error` says so; not `cancelled` (a client that waits gets an answer).
  bool shut_down = false;
  bool timed_out = false;
  int error_status = 0;    ///< 0, or the HTTP status of `error` (400, 500, 503)
  std::string error;

  /// Blocks until done.
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return done; });
  }

 private:
  friend class Engine;
  std::atomic<bool> cancel_{false};
  std::vector<RequestId> ids_;  // engine thread only
  std::vector<bool> taken_;
  int32_t n_open_ = 0;
};

/// Counters and gauges for /metrics.
struct EngineMetrics {
  int64_t requests_total = 0;     ///< tasks accepted
  int64_t requests_rejected = 0;  ///< tasks refused because the queue was full
  int64_t requests_finished = 0, requests_cancelled = 0, requests_timed_out = 0, requests_failed = 0;
  int32_t requests_running = 0;   ///< scheduler requests with a running sequence
  int32_t requests_queued = 0;    ///< scheduler requests waiting, plus tasks not handed over yet
  int32_t sequences_running = 0;
  int64_t prompt_tokens = 0;      ///< prompt tokens evaluated
  int64_t cached_tokens = 0;      ///< prompt tokens taken from the prefix cache
  int64_t generated_tokens = 0;
  int64_t steps = 0, preemptions = 0;
  double prompt_tok_s = 0, generated_tok_s = 0;  ///< over the last 10 s
  double busy_s = 0;              ///< time spent in forward passes
  int32_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0, kv_block_size = 0;
  int64_t kv_evictions = 0;
  int32_t n_parallel = 0, queue = 0;
  /// Where the engine thread's time goes (seconds, summed): the scheduler's step phases
  /// (SchedulerStats), the forward's own split (RunnerTimes), and the engine loop around steps
  /// (taking new tasks, polling for clients that hung up, collecting results, metrics).
  double plan_s = 0, graph_s = 0, compute_s = 0, logits_s = 0, sample_s = 0, commit_s = 0, outside_s = 0;
};

class Engine {
 public:
  using RunnerFactory = std::function<std::unique_ptr<ModelRunner>(const RunnerParams&)>;
  /// Creates the runner with `make_runner` (rp.n_seq_max set to n_parallel; every rank of a
  /// tensor-parallel model: examples::Loaded::runner) and the scheduler, and starts the engine
  /// thread. Throws what the runner's constructor throws.
  Engine(const RunnerFactory& make_runner, const tokenizer::Tokenizer& tok, RunnerParams rp, const EngineParams& p);
  /// Fails the tasks still held ("shutting down", 503) and joins the thread.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Hands a task to the engine. False, doing nothing, when the queue is full.
  bool submit(const std::shared_ptr<Task>& t);
  /// Ends a task at the next step (its client went away). Returns at once; the task becomes done.
  void cancel(Task& t);
  /// Shutting down: refuses new tasks and ends every task held, so waiting handlers return; a
  /// task whose client is still connected ends with error 503 "the server is shutting down"
  /// (shut_down), what it generated so far kept.
  void cancel_all();
  /// cancel_all() was called: submit() refuses everything.
  bool stopping() const { return cancel_all_; }
  /// Blocks until no task is held (accepted and not done), or `limit` passed; true when none is.
  bool wait_idle(std::chrono::milliseconds limit);

  EngineMetrics metrics() const;
  /// The most tokens one sequence may hold: min(the model's context, the pool).
  int32_t n_ctx_seq() const { return n_ctx_seq_; }
  int32_t n_ctx_pool() const { return n_ctx_pool_; }
  int32_t n_parallel() const { return params_.n_parallel; }
  int32_t queue() const { return params_.queue; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  void loop();
  void start(const std::shared_ptr<Task>& t);
  std::vector<std::shared_ptr<Task>> collect();
  void finish(Task& t);
  void snapshot(double step_s, int64_t d_prompt, int64_t d_gen);

  EngineParams params_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> sched_;
  int32_t n_ctx_seq_ = 0, n_ctx_pool_ = 0, n_vocab_ = 0;

  mutable std::mutex mu_;  // incoming_, starting_, inflight_, stop_ (taken before metrics_mu_)
  std::condition_variable cv_;
  std::condition_variable idle_cv_;  // inflight_ dropped
  int finishing_ = 0;  // tasks out of inflight_ whose waiters are not yet woken (finish)
  std::vector<std::shared_ptr<Task>> incoming_;
  // Tasks the engine thread took from incoming_ that the scheduler figures in m_ do not show yet
  // (until the snapshot after their first step): /metrics counts them as queued, so a request is
  // never missing from it between submission and the next step.
  size_t starting_ = 0;
  int32_t inflight_ = 0;  // sequences of the tasks accepted and not done
  bool stop_ = false;
  std::atomic<bool> cancel_all_{false};

  std::vector<std::shared_ptr<Task>> tasks_;  // engine thread only

  mutable std::mutex metrics_mu_;
  EngineMetrics m_;
  std::deque<std::tuple<std::chrono::steady_clock::time_point, int64_t, int64_t>> window_;
  std::chrono::steady_clock::time_point t_start_;

  std::thread thread_;
};

}  // namespace minfer::server
