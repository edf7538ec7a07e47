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

void HostCollective::barrier(std::unique_lock<std::mutex>& lk, const char* what) {
  const uint64_t phase = phase_;
  const auto failed = [what] { return std::runtime_error(std::string(what) + ": another rank of the tensor-parallel group failed"); };
  if (aborted_) throw failed();
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++phase_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lk, [&] { return phase_ != phase || aborted_; });
  if (phase_ == phase) throw failed();
}

void HostCollective::check_rank(int rank, const char* what) const {
  if (rank < 0 || rank >= n_)
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(rank) + " outside [0, " + std::to_string(n_) + ")");
}

void HostCollective::abort() {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void HostCollective::all_reduce_sum(int rank, float* data, size_t n) {
  check_rank(rank, "all_reduce_sum");
  if (n_ == 1) return;
  std::unique_lock<std::mutex> lk(mu_);
  data_[static_cast<size_t>(rank)] = data;
  sizes_[static_cast<size_t>(rank)] = n;
  barrier(lk, "all-reduce");  // every rank's data is in
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
  barrier(lk, "all-reduce");  // the sum is ready
  const bool bad = mismatch_;
  if (!bad) std::copy(sum_.begin(), sum_.end(), data);
  barrier(lk, "all-reduce");  // everyone copied: sum_ and data_ may be reused by the next call
  if (bad) throw std::invalid_argument("all_reduce_sum: the ranks handed in different element counts");
}

void HostCollective::all_gather(int rank, const float* send, size_t n, float* recv) {
  check_rank(rank, "all_gather");
  if (n_ == 1) {
    std::copy(send, send + n, recv);
    return;
  }
  std::unique_lock<std::mutex> lk(mu_);
  data_[static_cast<size_t>(rank)] = send;
  sizes_[static_cast<size_t>(rank)] = n;
  barrier(lk, "all-gather");  // every rank's data is in
  // Every rank reads the same sizes_, so all agree on the mismatch without a second phase.
  const bool bad = std::any_of(sizes_.begin(), sizes_.end(), [&](size_t s) { return s != sizes_[0]; });
  if (!bad)
    for (int r = 0; r < n_; ++r) {
      const float* d = data_[static_cast<size_t>(r)];
      std::copy(d, d + n, recv + static_cast<size_t>(r) * n);
    }
  barrier(lk, "all-gather");  // everyone copied: the ranks' send buffers and data_ may be reused
  if (bad) throw std::invalid_argument("all_gather: the ranks handed in different element counts");
}

}  // namespace minfer
