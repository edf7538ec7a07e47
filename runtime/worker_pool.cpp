#include "runtime/worker_pool.h"

#include <algorithm>
#include <utility>

namespace minfer {

WorkerPool::WorkerPool(int n_workers) {
  for (int w = 0; w < n_workers; ++w) workers_.emplace_back([this] { worker_loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void WorkerPool::run(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  const int helpers = static_cast<int>(std::min(n - 1, workers_.size()));
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    error_ = nullptr;
    error_index_ = 0;
    tickets_ = helpers;
  }
  for (int k = 0; k < helpers; ++k) wake_.notify_one();
  drain();
  std::unique_lock<std::mutex> lk(mu_);
  tickets_ = 0;  // a worker that has not woken yet would find nothing left
  done_.wait(lk, [&] { return active_ == 0; });
  fn_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void WorkerPool::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  // One index at a time under the lock: the jobs this pool is for take a millisecond or so, the
  // lock a fraction of a microsecond.
  while (next_ < n_) {
    const size_t i = next_++;
    const auto* fn = fn_;
    lk.unlock();
    std::exception_ptr e;
    try {
      (*fn)(i);
    } catch (...) {
      e = std::current_exception();
    }
    lk.lock();
    if (e && (!error_ || i < error_index_)) error_ = e, error_index_ = i;
  }
}

void WorkerPool::worker_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    wake_.wait(lk, [&] { return stop_ || tickets_ > 0; });
    if (stop_) return;
    --tickets_;
    ++active_;
    lk.unlock();
    drain();
    lk.lock();
    if (--active_ == 0) done_.notify_one();
  }
}

}  // namespace minfer
