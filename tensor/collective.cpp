#include "tensor/collective.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace minfer {

HostCollective::HostCollective(int n_ranks) : n_(n_ranks) {
  if (n_ranks < 1) throw std::invalid_argument("HostCollective: n_ranks must be >= 1, got " + std::to_string(n_ranks));
  data_.assign(static_cast<size_t>(n_), nullptr);
  sizes_.assign(static_cast<size_t>(n_), 0);
}

void HostCollective::barrier(std::unique_lock<std::mutex>& lk) {
  const uint64_t phase = phase_;
  if (aborted_) throw std::runtime_error("all-reduce: another rank of the tensor-parallel group failed");
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++phase_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lk, [&] { return phase_ != phase || aborted_; });
  if (phase_ == phase) throw std::runtime_error("all-reduce: another rank of the tensor-parallel group failed");
}

void HostCollective::abort() {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void HostCollective::all_reduce_sum(int rank, float* data, size_t n) {
  if (rank < 0 || rank >= n_)
    throw std::invalid_argument("all_reduce_sum: rank " + std::to_string(rank) + " outside [0, " + std::to_string(n_) + ")");
  if (n_ == 1) return;
  std::unique_lock<std::mutex> lk(mu_);
  data_[static_cast<size_t>(rank)] = data;
  sizes_[static_cast<size_t>(rank)] = n;
  barrier(lk);  // every rank's data is in
  if (rank == 0) {
    mismatch_ = std::any_of(sizes_.begin(), sizes_.end(), [&](size_t s) { return s != sizes_[0]; });
    if (!mismatch_) {
      // Rank order, element by element: the same bits on every rank whatever the thread timing.
      sum_.assign(data_[0], data_[0] + n);
      for (int r = 1; r < n_; ++r) {
        const float* d = data_[static_cast<size_t>(r)];
        for (size_t i = 0; i < n; ++i) sum_[i] += d[i];
      }
    }
  }
  barrier(lk);  // the sum is ready
  const bool bad = mismatch_;
  if (!bad) std::copy(sum_.begin(), sum_.end(), data);
  barrier(lk);  // everyone copied: sum_ and data_ may be reused by the next call
  if (bad) throw std::invalid_argument("all_reduce_sum: the ranks handed in different element counts");
}

}  // namespace minfer
