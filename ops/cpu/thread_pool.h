// A fixed pool of worker threads for data-parallel kernels.
//
// A graph runs dozens of small kernels per token, so waking workers must be cheap: workers spin
// briefly on an atomic job counter before they sleep on a condition variable, and the caller
// spins on the completion counter, yielding once the spin runs out. Kernels should still give
// tiny jobs a grain large enough that they run inline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace minfer::cpu {

class ThreadPool {
 public:
  /// n_threads <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(begin, end) over [0, n) split into chunks of at least `grain` items, on all threads
  /// (the caller included), and returns when every chunk is done. Every chunk runs even when one
  /// throws; then the exception of the lowest failing chunk is rethrown here. Not reentrant: one
  /// parallel_for at a time.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};  // bumped per job
  std::atomic<int> pending_{0};          // workers still inside the current job
  std::atomic<bool> stop_{false};

  // The current job.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
  int64_t error_begin_ = 0;  // first item of the chunk that threw error_
  std::mutex error_mu_;
};

}  // namespace minfer::cpu
