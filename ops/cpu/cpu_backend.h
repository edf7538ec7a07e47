// The CPU backend: host memory, a thread pool, and the reference kernels (Eigen where it fits).
#pragma once

#include <memory>

#include "ops/cpu/thread_pool.h"
#include "tensor/backend.h"

namespace minfer {

class CpuBackend final : public Backend {
 public:
  /// n_threads <= 0: one per hardware thread.
  explicit CpuBackend(int n_threads = 0);
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
  bool is_host() const override { return true; }
  size_t alignment() const override { return 64; }
  std::unique_ptr<Buffer> alloc_buffer(size_t bytes) override;
  void set_tensor(Tensor& t, const void* src, size_t offset, size_t n) override;
  void get_tensor(const Tensor& t, void* dst, size_t offset, size_t n) override;
  bool supports_op(const Tensor& node) const override;
  void compute(Graph& g) override;

  /// Changes the number of threads (recreates the pool).
  void set_n_threads(int n);
  int n_threads() const { return pool_->n_threads(); }

  /// A buffer over existing host memory (e.g. a mapped GGUF file); minfer does not free it.
  std::unique_ptr<Buffer> wrap_host_memory(void* base, size_t size) override;

  /// Any Collective over host memory (HostCollective: the ranks are threads of this process).
  void join(std::shared_ptr<Collective> group, int rank) override;

 private:
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::shared_ptr<Collective> group_;
  int rank_ = 0;
};

}  // namespace minfer
