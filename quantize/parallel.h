// Row-parallel production of tensor data for streamed writing: a small thread pool and a
// double-buffered "produce rows on the workers, emit them in order on the caller" loop. Used by
// quantize_file (dequantize + quantize rows) and make_model (generate + quantize rows), so a
// tensor of any size goes to disk through two bounded buffers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace minfer::quantize {

class ThreadPool {
 public:
  /// `n_threads` workers; <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return static_cast<int>(workers_.size()); }

  /// Starts fn(i) for every i in [0, n) on the workers and returns at once. One job at a time:
  /// call wait() before the next start(). Throws std::logic_error when a job is running.
  void start(int64_t n, std::function<void(int64_t)> fn);
  /// Blocks until the started job is done (no-op without one) and rethrows the first exception
  /// a task threw; the tasks not yet begun when it was thrown are skipped.
  void wait();
  /// start() then wait().
  void run(int64_t n, std::function<void(int64_t)> fn);

 private:
  void worker_loop();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::function<void(int64_t)> fn_;
  int64_t n_ = 0, next_ = 0, done_ = 0;
  uint64_t generation_ = 0;
  bool running_ = false, stop_ = false;
  std::exception_ptr error_;
};

/// Emits `n_rows` rows of `row_bytes` bytes in row order. `produce(first_row, n, dst)` fills rows
/// [first_row, first_row + n) into dst (n * row_bytes bytes); it runs on the pool's workers,
/// concurrently for disjoint row ranges of about `task_elems` elements of `row_elems` each. The
/// caller's thread calls `emit(data, nbytes)` for one batch while the workers produce the next
/// (two buffers of ~4 tasks per worker, kept by the calling thread and reused by its next call).
/// `on_rows(n)` (optional) reports rows emitted.
/// Exceptions from produce or emit propagate after the workers have stopped.
void produce_rows(ThreadPool& pool, int64_t n_rows, size_t row_bytes, int64_t row_elems,
                  const std::function<void(int64_t, int64_t, uint8_t*)>& produce,
                  const std::function<void(const void*, size_t)>& emit,
                  const std::function<void(int64_t)>& on_rows = nullptr, int64_t task_elems = 1 << 18);

}  // namespace minfer::quantize
