// Collectives: the ranks of one tensor-parallel group summing or gathering their partial results.
//
// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) splits a layer's column-parallel matmuls
// (q/k/v, gate/up) and row-parallel matmuls (attention output, down) over N ranks; each rank
// holds a partial sum of the row-parallel outputs, and an all-reduce adds them. The vocab-parallel
// LM head leaves each rank a slice of the logits, which an all-gather joins. The graph records
// those as ops::all_reduce / ops::all_gather (Op::ALL_REDUCE, Op::ALL_GATHER); a backend that
// belongs to a group (Backend::join) runs them through the group's Collective: CPU backends a
// HostCollective (below), CUDA backends a cuda::NcclCollective (ops/cuda/nccl_collective.h, which
// also queues the exchange on device memory; runtime/backends.h create_group picks one).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace minfer {

/// One tensor-parallel group of n_ranks() ranks.
class Collective {
 public:
  virtual ~Collective() = default;
  virtual int n_ranks() const = 0;
  /// Rank `rank` (0 <= rank < n_ranks()) hands in host f32 data [n]; when every rank has called,
  /// each one's data holds the element-wise sum over the ranks, the same bits on every rank
  /// (HostCollective adds in rank order, 0 + 1 + ...; NCCL in its own order). The ranks' calls
  /// pair up in call order and must agree on n (HostCollective: std::invalid_argument otherwise,
  /// on every rank). Blocks until all ranks have called.
  virtual void all_reduce_sum(int rank, float* data, size_t n) = 0;
  /// Rank `rank` hands in host f32 `send` [n]; when every rank has called, each one's `recv`
  /// [n_ranks() * n] holds every rank's data in rank order (rank r's at r * n), as NCCL's
  /// ncclAllGather. send and recv must not overlap. The calls pair up in call order with the
  /// all-reduces and must agree on n (std::invalid_argument otherwise, on every rank). Blocks
  /// until all ranks have called.
  virtual void all_gather(int rank, const float* send, size_t n, float* recv) = 0;
  /// A rank failed and will not call again: every waiting and later collective call throws
  /// std::runtime_error instead of waiting forever. The group stays unusable.
  virtual void abort() = 0;
};

/// The ranks are threads of this process working on host memory (CPU backends; the sharded
/// forward's tests).
class HostCollective final : public Collective {
 public:
  /// Throws std::invalid_argument for n_ranks < 1.
  explicit HostCollective(int n_ranks);
  int n_ranks() const override { return n_; }
  void all_reduce_sum(int rank, float* data, size_t n) override;
  void all_gather(int rank, const float* send, size_t n, float* recv) override;
  void abort() override;

 private:
  // A reusable barrier: waits until all n_ ranks arrived in this phase. `what` names the
  // collective in the error thrown when another rank aborted.
  void barrier(std::unique_lock<std::mutex>& lk, const char* what);
  void check_rank(int rank, const char* what) const;

  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t phase_ = 0;
  std::vector<const float*> data_;
  std::vector<size_t> sizes_;
  std::vector<float> sum_;
  bool mismatch_ = false;
  bool aborted_ = false;
};

}  // namespace minfer
