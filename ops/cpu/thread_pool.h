// A fixed pool of worker threads for data-parallel kernels.
//
// A graph runs dozens of small kernels per token, so waking workers must be cheap: workers spin
// briefly on an atomic job counter before they sleep on a condition variable, and the caller
// spins on the count of finished items, yielding once the spin runs out. The caller waits for the
// chunks, never for the workers: a worker the OS has not scheduled yet (a loaded server host) does
// not hold up a job the others already finished, and when it does wake it cannot take a chunk of
// a later job by mistake (chunks are claimed with the job's number). Kernels should still give
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
  /// The most threads a pool takes (ggml's GGML_MAX_N_THREADS).
  static constexpr int kMaxThreads = 512;
  /// n_threads <= 0 means std::thread::hardware_concurrency() (at most kMaxThreads). Throws
  /// std::invalid_argument for n_threads > kMaxThreads.
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
  void run_chunks(uint32_t job);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint32_t> generation_{0};  // the current job's number, bumped per job
  std::atomic<bool> stop_{false};

  // The current job. Each word packs the job number (high 32 bits) with a value (low 32 bits):
  // the next unclaimed item (claim_), the item count (size_) and the chunk length (chunk_). A
  // worker that holds an older job's number sees the mismatch and leaves (the sizes of the next job
  // are written before its claim word, so a size must be checked against the job too), and a
  // claim is a compare-and-swap that fails once the job changed. fn_ is only read under a
  // successful claim: it cannot change while a claimed chunk runs (the caller waits for it).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  std::atomic<uint64_t> claim_{0}, size_{0}, chunk_{0};
  std::atomic<int64_t> done_{0};  // items of the current job finished
  std::exception_ptr error_;
  int64_t error_begin_ = 0;  // first item of the chunk that threw error_
  std::mutex error_mu_;
};

}  // namespace minfer::cpu
