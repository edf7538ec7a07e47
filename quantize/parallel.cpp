#include "quantize/parallel.h"

#include <algorithm>
#include <stdexcept>

namespace minfer::quantize {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(static_cast<size_t>(n_threads));
  for (int i = 0; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::start(int64_t n, std::function<void(int64_t)> fn) {
  std::lock_guard<std::mutex> lk(mu_);
  if (running_) throw std::logic_error("ThreadPool::start: a job is already running");
  fn_ = std::move(fn);
  n_ = std::max<int64_t>(n, 0);
  next_ = done_ = 0;
  error_ = nullptr;
  running_ = true;
  ++generation_;
  cv_work_.notify_all();
}

void ThreadPool::wait() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return !running_ || done_ == n_; });
  running_ = false;
  fn_ = nullptr;
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void ThreadPool::run(int64_t n, std::function<void(int64_t)> fn) {
  start(n, std::move(fn));
  wait();
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_work_.wait(lk, [&] { return stop_ || (running_ && generation_ != seen && next_ < n_); });
    if (stop_) return;
    seen = generation_;
    while (running_ && next_ < n_) {
      const int64_t i = next_++;
      const bool skip = error_ != nullptr;
      lk.unlock();
      std::exception_ptr err;
      if (!skip) {
        try {
          fn_(i);
        } catch (...) {
          err = std::current_exception();
        }
      }
      lk.lock();
      if (err && !error_) error_ = err;
      if (++done_ == n_) cv_done_.notify_all();
    }
  }
}

void produce_rows(ThreadPool& pool, int64_t n_rows, size_t row_bytes, int64_t row_elems,
                  const std::function<void(int64_t, int64_t, uint8_t*)>& produce,
                  const std::function<void(const void*, size_t)>& emit,
                  const std::function<void(int64_t)>& on_rows, int64_t task_elems) {
  if (n_rows <= 0) return;
  const int64_t rows_per_task = std::clamp<int64_t>(task_elems / std::max<int64_t>(row_elems, 1), 1, n_rows);
  const int64_t rows_per_batch = std::min(n_rows, rows_per_task * 4 * pool.n_threads());
  // Reused across calls (one writer thread calls this per tensor): page-faulting fresh buffers
  // for each of a model's hundreds of tensors would cost more than the copies they hold.
  thread_local std::vector<uint8_t> buf[2];
  for (auto& b : buf)
    if (b.size() < static_cast<size_t>(rows_per_batch) * row_bytes) b.resize(static_cast<size_t>(rows_per_batch) * row_bytes);

  auto start_batch = [&](int64_t first, uint8_t* dst) {
    const int64_t rows = std::min(rows_per_batch, n_rows - first);
    const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
    pool.start(tasks, [=, &produce](int64_t t) {
      const int64_t r0 = t * rows_per_task;
      const int64_t n = std::min(rows_per_task, rows - r0);
      produce(first + r0, n, dst + static_cast<size_t>(r0) * row_bytes);
    });
    return rows;
  };

  int64_t first = 0;
  int cur = 0;
  int64_t rows = start_batch(first, buf[cur].data());
  pool.wait();
  while (rows > 0) {
    const int64_t next_first = first + rows;
    int64_t next_rows = 0;
    if (next_first < n_rows) next_rows = start_batch(next_first, buf[1 - cur].data());
    try {
      emit(buf[cur].data(), static_cast<size_t>(rows) * row_bytes);
      if (on_rows) on_rows(rows);
    } catch (...) {
      try {
        pool.wait();
      } catch (...) {
      }
      throw;
    }
    if (next_rows > 0) pool.wait();
    first = next_first;
    rows = next_rows;
    cur = 1 - cur;
  }
}

}  // namespace minfer::quantize
