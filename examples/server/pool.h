// The HTTP server's threads: httplib's TaskQueue, one job per accepted connection.
//
// httplib's own ThreadPool has a fixed number of threads, and a connection holds its thread for
// as long as httplib reads its request — up to the read timeout (--timeout, 600 s) per read — and
// between keep-alive requests (5 s). A few dozen clients that open connections and send slowly
// (slowloris) left no thread for anyone else, /health included. This pool starts a thread
// whenever a connection arrives and no thread is idle, up to `max_threads`, keeps `min_threads`,
// and lets the others exit after `idle` without work; past `max_threads` connections wait for a
// thread, as they did in the fixed pool.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace minfer::server {

class GrowingPool : public httplib::TaskQueue {
 public:
  GrowingPool(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle = std::chrono::seconds(30))
      : s_(std::make_shared<State>()) {
    s_->min = std::max<size_t>(1, min_threads);
    s_->max = std::max(s_->min, max_threads);
    s_->idle_limit = idle;
    std::lock_guard<std::mutex> lk(s_->mu);
    for (size_t i = 0; i < s_->min; ++i) spawn(*s_);
  }
  ~GrowingPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lk(s_->mu);
    s_->jobs.push_back(std::move(fn));
    if (s_->idle < s_->jobs.size() && s_->threads < s_->max) spawn(*s_);
    s_->cv.notify_one();
  }

  /// Runs the jobs queued, then returns once every thread has ended.
  void shutdown() override {
    std::unique_lock<std::mutex> lk(s_->mu);
    s_->stop = true;
    s_->cv.notify_all();
    s_->gone.wait(lk, [&] { return s_->threads == 0; });
  }

  size_t threads() const {
    std::lock_guard<std::mutex> lk(s_->mu);
    return s_->threads;
  }

 private:
  // Shared with the (detached) threads, so a thread that ends after shutdown() returned never
  // touches a destroyed pool.
  struct State : std::enable_shared_from_this<State> {
    std::mutex mu;
    std::condition_variable cv, gone;
    std::deque<std::function<void()>> jobs;
    size_t threads = 0, idle = 0, min = 1, max = 1;
    std::chrono::milliseconds idle_limit{30000};
    bool stop = false;
  };

  static void spawn(State& s) {  // s.mu held
    ++s.threads;
    std::thread([st = s.shared_from_this()] { work(st); }).detach();
  }

  static void work(const std::shared_ptr<State>& s) {
    std::unique_lock<std::mutex> lk(s->mu);
    for (;;) {
      ++s->idle;
      const bool woke = s->cv.wait_for(lk, s->idle_limit, [&] { return s->stop || !s->jobs.empty(); });
      --s->idle;
      if (s->jobs.empty()) {
        if (s->stop || (!woke && s->threads > s->min)) break;
        continue;
      }
      auto fn = std::move(s->jobs.front());
      s->jobs.pop_front();
      lk.unlock();
      fn();
      lk.lock();
    }
    --s->threads;
    s->gone.notify_all();
  }

  std::shared_ptr<State> s_;
};

}  // namespace minfer::server
