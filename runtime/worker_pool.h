// WorkerPool: threads kept for the life of their owner, to run a few independent jobs at once
// (the scheduler's per-row sampling: one full-vocabulary draw per sequence each step).
//
// Starting threads for every batch of jobs costs tens of microseconds per thread and, per step,
// adds up to more than the work it spreads; these threads start once, sleep on a condition
// variable between batches (no spinning: the forward pass between two batches needs the cores)
// and are joined by the destructor. run() wakes only as many workers as the batch has jobs
// beyond the one the caller takes.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace minfer {

class WorkerPool {
 public:
  /// Starts `n_workers` threads (<= 0: none; run() is then a plain loop on the caller).
  explicit WorkerPool(int n_workers);
  /// Joins the workers (a run() in progress on another thread is not allowed).
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int n_workers() const { return static_cast<int>(workers_.size()); }

  /// Calls fn(i) once for every i in [0, n), on the calling thread and up to n - 1 workers, in no
  /// particular order, and returns when every call has returned. Every index runs even when a
  /// call throws; then the exception of the lowest index that threw is rethrown here. One run()
  /// at a time (not reentrant, not for concurrent callers).
  void run(size_t n, const std::function<void(size_t)>& fn);

 private:
  void worker_loop();
  void drain();  // takes indices until none is left

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  // The current batch (set under mu_ before any ticket is handed out).
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  size_t next_ = 0;        // next index to take (under mu_)
  int tickets_ = 0;        // workers asked to join the batch that have not yet
  int active_ = 0;         // workers inside the batch
  size_t error_index_ = 0;
  std::exception_ptr error_;
};

}  // namespace minfer
