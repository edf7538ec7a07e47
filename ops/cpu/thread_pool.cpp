#include "ops/cpu/thread_pool.h"

#include <algorithm>
#include <utility>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define MINFER_PAUSE() _mm_pause()
#else
#define MINFER_PAUSE() std::this_thread::yield()
#endif

namespace minfer::cpu {
namespace {

// A few microseconds of spinning before sleeping: enough to catch the next kernel of a graph,
// short enough not to starve other processes when the machine is oversubscribed.
constexpr int kSpinIterations = 2000;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    const int64_t b = next_.fetch_add(chunk_);
    if (b >= n_) break;
    const int64_t e = std::min(n_, b + chunk_);
    try {
      (*fn_)(b, e);
    } catch (...) {
      // The lowest failing chunk's error, whichever thread met it first: the same error every run.
      std::lock_guard<std::mutex> lk(error_mu_);
      if (!error_ || b < error_begin_) error_ = std::current_exception(), error_begin_ = b;
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    bool got = false;
    for (int i = 0; i < kSpinIterations; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen || stop_.load(std::memory_order_relaxed)) {
        got = true;
        break;
      }
      MINFER_PAUSE();
    }
    if (!got) {
      std::unique_lock<std::mutex> lk(mu_);
      wake_.wait(lk, [&] { return stop_.load() || generation_.load() != seen; });
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    run_chunks();
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int nt = n_threads();
  if (nt == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balances uneven rows without much scheduling traffic.
  fn_ = &fn;
  n_ = n;
  chunk_ = std::max(grain, (n + 4 * nt - 1) / (4 * nt));
  next_.store(0);
  error_ = nullptr;
  error_begin_ = 0;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_release);
  {
    // Publishing under the mutex pairs with the sleepers' predicate check (no lost wake-up).
    std::lock_guard<std::mutex> lk(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_chunks();
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < kSpinIterations) MINFER_PAUSE();
    else std::this_thread::yield();  // a worker was descheduled: give it the core
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace minfer::cpu
