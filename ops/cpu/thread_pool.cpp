#include "ops/cpu/thread_pool.h"

#include <algorithm>
#include <stdexcept>
#include <string>
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
  if (n_threads > kMaxThreads)
    throw std::invalid_argument("a thread pool of " + std::to_string(n_threads) + " threads: at most " +
                                std::to_string(kMaxThreads));
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
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

void ThreadPool::run_chunks(uint32_t job) {
  auto tag = [](uint64_t w) { return static_cast<uint32_t>(w >> 32); };
  auto low = [](uint64_t w) { return static_cast<int64_t>(w & 0xFFFFFFFFu); };
  for (;;) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    const uint64_t size = size_.load(std::memory_order_acquire), chunk = chunk_.load(std::memory_order_acquire);
    if (tag(c) != job || tag(size) != job || tag(chunk) != job) return;  // a later job started: not ours
    const int64_t b = low(c), n = low(size);
    if (b >= n) return;
    const int64_t e = std::min(n, b + low(chunk));
    if (!claim_.compare_exchange_weak(c, (c & ~uint64_t{0xFFFFFFFFu}) | static_cast<uint64_t>(e),
                                      std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    try {
      (*fn_)(b, e);
    } catch (...) {
      // The lowest failing chunk's error, whichever thread met it first: the same error every run.
      std::lock_guard<std::mutex> lk(error_mu_);
      if (!error_ || b < error_begin_) error_ = std::current_exception(), error_begin_ = b;
    }
    done_.fetch_add(e - b, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
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
    run_chunks(seen);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n > int64_t{0xFFFFFFFF}) throw std::invalid_argument("ThreadPool::parallel_for: more than 2^32 - 1 items");
  grain = std::max<int64_t>(grain, 1);
  const int nt = n_threads();
  if (nt == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balances uneven rows without much scheduling traffic.
  fn_ = &fn;
  const int64_t chunk = std::max(grain, (n + 4 * nt - 1) / (4 * nt));
  done_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  error_begin_ = 0;
  uint32_t job = 0;
  {
    // Publishing under the mutex pairs with the sleepers' predicate check (no lost wake-up).
    std::lock_guard<std::mutex> lk(mu_);
    job = generation_.load(std::memory_order_relaxed) + 1;
    const uint64_t tag = static_cast<uint64_t>(job) << 32;
    size_.store(tag | static_cast<uint64_t>(n), std::memory_order_release);
    chunk_.store(tag | static_cast<uint64_t>(std::min<int64_t>(chunk, n)), std::memory_order_release);
    claim_.store(tag, std::memory_order_release);
    generation_.store(job, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks(job);
  for (int i = 0; done_.load(std::memory_order_acquire) != n; ++i) {
    if (i < kSpinIterations) MINFER_PAUSE();
    else std::this_thread::yield();  // a worker holding a chunk was descheduled: give it the core
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace minfer::cpu
