#include "engine.h"

#include <fmt/format.h>

#include <algorithm>

#include "conn.h"

namespace minfer::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRateWindow = std::chrono::seconds(10);

}  // namespace

Engine::Engine(const RunnerFactory& make_runner, const tokenizer::Tokenizer& tok, RunnerParams rp, const EngineParams& p)
    : params_(p) {
  if (params_.n_parallel < 1) throw std::invalid_argument(fmt::format("--parallel must be >= 1, got {}", params_.n_parallel));
  if (params_.queue < 0) throw std::invalid_argument(fmt::format("--queue must be >= 0, got {}", params_.queue));
  rp.n_seq_max = params_.n_parallel;
  runner_ = make_runner(rp);
  if (params_.warmup) runner_->warmup(params_.n_parallel);
  SchedulerParams sp;
  sp.n_parallel = params_.n_parallel;
  sp.prefix_cache = params_.prefix_cache;
  sched_ = std::make_unique<Scheduler>(*runner_, tok, sp);
  params_.n_parallel = std::min(params_.n_parallel, runner_->n_batch());  // as the scheduler runs them
  const KvCache& kv = runner_->kv();
  n_ctx_seq_ = std::min(kv.n_ctx_seq(), kv.n_ctx());
  n_ctx_pool_ = kv.n_ctx();
  n_vocab_ = runner_->n_vocab();
  t_start_ = Clock::now();
  snapshot(0, 0, 0);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Engine::submit(const std::shared_ptr<Task>& t) {
  const int32_t n = t->n_outputs();
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ || cancel_all_ || inflight_ + n > params_.n_parallel + params_.queue) {
      std::lock_guard<std::mutex> mk(metrics_mu_);
      ++m_.requests_rejected;
      return false;
    }
    inflight_ += n;
    t->choices.assign(static_cast<size_t>(n), {});
    if (params_.timeout_s > 0) {
      const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(params_.timeout_s));
      for (Request& r : t->requests) r.deadline = deadline;
    }
    incoming_.push_back(t);
  }
  cv_.notify_one();
  return true;
}

void Engine::cancel(Task& t) {
  t.cancel_ = true;
  cv_.notify_one();
}

void Engine::cancel_all() {
  cancel_all_ = true;
  cv_.notify_one();
}

// Submits a task's prompts to the scheduler, with callbacks that fill its choices.
void Engine::start(const std::shared_ptr<Task>& tp) {
  Task& t = *tp;
  const auto n = static_cast<size_t>(t.n_choices());
  Task* raw = &t;
  std::string error;
  int status = 0;
  for (size_t p = 0; p < t.requests.size() && error.empty(); ++p) {
    Request r = t.requests[p];  // (the task keeps its requests: n_choices() reads them)
    const size_t base = p * n;
    r.on_text = [raw, base](int32_t c, std::string_view s) {
      std::lock_guard<std::mutex> lk(raw->mu);
      raw->choices[base + static_cast<size_t>(c)].text += s;
    };
    r.on_token = [raw, base](int32_t c, int32_t, const TokenLogprob* lp) {
      {
        std::lock_guard<std::mutex> lk(raw->mu);
        if (lp) raw->choices[base + static_cast<size_t>(c)].logprobs.push_back(*lp);
      }
      raw->cv.notify_all();
    };
    try {
      t.ids_.push_back(sched_->submit(std::move(r)));
      t.taken_.push_back(false);
      ++t.n_open_;
    } catch (const ContextFullError& e) {
      error = e.what(), status = 400;
    } catch (const std::invalid_argument& e) {
      error = e.what(), status = 400;
    } catch (const std::exception& e) {
      error = e.what(), status = 500;
    }
  }
  if (!error.empty()) {
    for (RequestId id : t.ids_) sched_->cancel(id);
    std::lock_guard<std::mutex> lk(t.mu);
    t.error = error;
    t.error_status = status;
  }
  {
    std::lock_guard<std::mutex> mk(metrics_mu_);
    ++m_.requests_total;
  }
  tasks_.push_back(tp);
}

void Engine::finish(Task& t) {
  {
    std::lock_guard<std::mutex> lk(t.mu);
    t.done = true;
  }
  t.cv.notify_all();
  {
    std::lock_guard<std::mutex> lk(mu_);
    --finishing_;
  }
  idle_cv_.notify_all();
}

bool Engine::wait_idle(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lk(mu_);
  return idle_cv_.wait_for(lk, limit, [&] { return inflight_ == 0 && finishing_ == 0; });
}

// Takes the results of finished requests into their tasks; returns the tasks now done, which
// leave the engine (the caller finishes them after the metrics snapshot, so a client that has its
// answer sees metrics that include it).
std::vector<std::shared_ptr<Task>> Engine::collect() {
  for (auto& tp : tasks_) {
    Task& t = *tp;
    const auto n = static_cast<size_t>(t.n_choices());
    for (size_t k = 0; k < t.ids_.size(); ++k) {
      if (t.taken_[k] || !sched_->finished(t.ids_[k])) continue;
      RequestResult res = sched_->take(t.ids_[k]);
      t.taken_[k] = true;
      --t.n_open_;
      {
        std::lock_guard<std::mutex> lk(t.mu);
        for (size_t c = 0; c < n && c < res.choices.size(); ++c) {
          Task::Choice& ch = t.choices[k * n + c];
          ch.result = std::move(res.choices[c]);
          ch.done = true;
        }
        t.cancelled |= res.cancelled && !t.shut_down;
        t.timed_out |= res.timed_out;
        if (!res.error.empty() && t.error.empty()) {
          t.error = res.error;
          t.error_status = 503;  // the KV pool could not hold it now
        }
      }
      t.cv.notify_all();
    }
  }
  std::vector<std::shared_ptr<Task>> keep;
  for (auto& tp : tasks_) {
    if (tp->n_open_ > 0) {
      keep.push_back(tp);
      continue;
    }
    std::lock_guard<std::mutex> mk(metrics_mu_);
    ++m_.requests_finished;
    if (tp->cancelled) ++m_.requests_cancelled;
    if (tp->timed_out) ++m_.requests_timed_out;
    if (tp->error_status >= 500) ++m_.requests_failed;
  }
  std::vector<std::shared_ptr<Task>> done;
  for (auto& tp : tasks_)
    if (tp->n_open_ == 0) done.push_back(tp);
  tasks_.swap(keep);
  return done;
}

void Engine::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Task>> fresh;
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (tasks_.empty()) cv_.wait(lk, [&] { return stop_ || !incoming_.empty() || (cancel_all_ && !tasks_.empty()); });
      if (stop_) break;
      fresh.swap(incoming_);
      starting_ = fresh.size();
    }
    const auto t_iter = Clock::now();  // (idle waiting above is not engine time)
    for (auto& t : fresh) start(t);
    // Clients that hung up, and tasks cancelled by their handler: their sequences retire in
    // this step.
    std::vector<int> fds;
    for (auto& t : tasks_) fds.push_back(t->cancel_ ? -1 : t->fd);
    std::unique_ptr<bool[]> closed(new bool[fds.size() + 1]);
    peers_closed(fds, std::span<bool>(closed.get(), fds.size()));
    for (size_t i = 0; i < tasks_.size(); ++i) {
      Task& t = *tasks_[i];
      if (closed[i]) t.cancel_ = true;
      if (cancel_all_ && !t.cancel_) {  // shutting down under a client that waits: it gets a 503
        t.cancel_ = true;
        std::lock_guard<std::mutex> lk(t.mu);
        t.shut_down = true;
        if (t.error.empty()) t.error = "the server is shutting down", t.error_status = 503;
      }
      if (!t.cancel_) continue;
      for (size_t k = 0; k < t.ids_.size(); ++k)
        if (!t.taken_[k]) sched_->cancel(t.ids_[k]);
    }
    const SchedulerStats before = sched_->stats();
    const auto t0 = Clock::now();
    bool ran = false;
    try {
      ran = sched_->step();
    } catch (const std::exception& e) {
      // All or nothing: no sequence changed. Fail what was in flight; the next step retires it.
      const std::string why = fmt::format("the forward pass failed: {}", e.what());
      for (auto& t : tasks_) {
        {
          std::lock_guard<std::mutex> lk(t->mu);
          if (t->error.empty()) t->error = why, t->error_status = 500;
        }
        for (size_t k = 0; k < t->ids_.size(); ++k)
          if (!t->taken_[k]) sched_->cancel(t->ids_[k]);
      }
      ran = true;
    }
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto done = collect();
    const SchedulerStats& after = sched_->stats();
    // Finished tasks give their slots back before the metrics say the server is idle (a client
    // that sees it idle in /metrics is admitted: the 503 check counts inflight_), and the metrics
    // are current before their waiters wake.
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (auto& t : done) inflight_ -= t->n_outputs();
      finishing_ += static_cast<int>(done.size());
    }
    snapshot(ran ? dt : 0, after.prompt_tokens - before.prompt_tokens, after.generated_tokens - before.generated_tokens);
    for (auto& t : done) finish(*t);
    {
      std::lock_guard<std::mutex> mk(metrics_mu_);
      m_.outside_s += std::chrono::duration<double>(Clock::now() - t_iter).count() - dt;
    }
    if (!ran && !tasks_.empty()) {  // nothing could run (should not happen): do not spin
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(1));
    }
  }
  // Shutting down: every task still held is answered.
  std::vector<std::shared_ptr<Task>> rest = tasks_;
  {
    std::lock_guard<std::mutex> lk(mu_);
    rest.insert(rest.end(), incoming_.begin(), incoming_.end());
    incoming_.clear();
  }
  for (auto& t : rest) {
    {
      std::lock_guard<std::mutex> lk(t->mu);
      if (t->error.empty()) t->error = "the server is shutting down", t->error_status = 503;
      t->done = true;
    }
    t->cv.notify_all();
  }
  tasks_.clear();
  {
    std::lock_guard<std::mutex> lk(mu_);
    inflight_ = 0;
  }
  idle_cv_.notify_all();
}

void Engine::snapshot(double step_s, int64_t d_prompt, int64_t d_gen) {
  const SchedulerStats& st = sched_->stats();
  const KvCache& kv = runner_->kv();
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lk(mu_);  // starting_ drops as m_ takes the scheduler's figures
  std::lock_guard<std::mutex> mk(metrics_mu_);
  starting_ = 0;
  m_.requests_running = sched_->n_running_requests();
  m_.requests_queued = sched_->n_waiting();
  m_.sequences_running = sched_->n_running();
  m_.prompt_tokens = st.prompt_tokens;
  m_.cached_tokens = st.cached_tokens;
  m_.generated_tokens = st.generated_tokens;
  m_.steps = st.steps;
  m_.preemptions = st.preemptions;
  m_.busy_s += step_s;
  m_.kv_blocks_total = kv.pool().n_blocks();
  m_.kv_blocks_used = kv.pool().n_used();
  m_.kv_blocks_cached = kv.pool().n_cached();
  m_.kv_block_size = kv.block_size();
  m_.kv_evictions = kv.pool().stats().evictions;
  m_.n_parallel = params_.n_parallel;
  m_.queue = params_.queue;
  const RunnerTimes& rt = runner_->times();
  m_.plan_s = st.plan_s;
  m_.graph_s = rt.graph_s;
  m_.compute_s = rt.compute_s;
  m_.logits_s = rt.logits_s;
  m_.sample_s = st.sample_s;
  m_.commit_s = st.commit_s;
  if (d_prompt > 0 || d_gen > 0) window_.emplace_back(now, d_prompt, d_gen);
  while (!window_.empty() && now - std::get<0>(window_.front()) > kRateWindow) window_.pop_front();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lk(mu_);  // incoming_ and starting_ as of m_
  std::lock_guard<std::mutex> mk(metrics_mu_);
  EngineMetrics m = m_;
  m.requests_queued += static_cast<int32_t>(incoming_.size() + starting_);
  const auto now = Clock::now();
  int64_t p = 0, g = 0;
  for (const auto& [t, dp, dg] : window_)
    if (now - t <= kRateWindow) p += dp, g += dg;
  const double span = std::min(std::chrono::duration<double>(kRateWindow).count(),
                               std::chrono::duration<double>(now - t_start_).count());
  if (span > 0) m.prompt_tok_s = static_cast<double>(p) / span, m.generated_tok_s = static_cast<double>(g) / span;
  return m;
}

}  // namespace minfer::server
