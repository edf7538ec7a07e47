#include "ops/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "ops/cpu/kernels.h"
#include "tensor/collective.h"

namespace minfer {
namespace {

class HostBuffer final : public Buffer {
 public:
  HostBuffer(Backend& b, void* base, size_t size, bool owned) : backend_(b), base_(base), size_(size), owned_(owned) {}
  ~HostBuffer() override {
    if (owned_) std::free(base_);
  }
  void* base() const override { return base_; }
  size_t size() const override { return size_; }
  Backend& backend() const override { return backend_; }
  void fill(uint8_t v) override { std::memset(base_, v, size_); }

 private:
  Backend& backend_;
  void* base_;
  size_t size_;
  bool owned_;
};

void check_range(const Tensor& t, size_t offset, size_t n, const char* what) {
  const size_t total = t.nbytes();
  if (offset > total || n > total - offset)
    throw std::out_of_range(fmt::format("{}: bytes [{}, {}) outside {} ({} bytes)", what, offset, offset + n,
                                        describe(t), total));
  if (!t.data) throw std::logic_error(fmt::format("{}: {} has no storage", what, describe(t)));
}

}  // namespace

CpuBackend::CpuBackend(int n_threads) : pool_(std::make_unique<cpu::ThreadPool>(n_threads)) {}
CpuBackend::~CpuBackend() = default;

void CpuBackend::set_n_threads(int n) { pool_ = std::make_unique<cpu::ThreadPool>(n); }

std::unique_ptr<Buffer> CpuBackend::alloc_buffer(size_t bytes) {
  const size_t a = alignment();
  const size_t rounded = (std::max<size_t>(bytes, 1) + a - 1) / a * a;
  void* p = std::aligned_alloc(a, rounded);
  if (!p) throw OutOfMemoryError(fmt::format("cpu: cannot allocate {} bytes ({:.1f} MiB) of host memory", bytes,
                                             bytes / 1048576.0));
  return std::make_unique<HostBuffer>(*this, p, bytes, true);
}

std::unique_ptr<Buffer> CpuBackend::wrap_host_memory(void* base, size_t size) {
  return std::make_unique<HostBuffer>(*this, base, size, false);
}

void CpuBackend::set_tensor(Tensor& t, const void* src, size_t offset, size_t n) {
  check_range(t, offset, n, "cpu set_tensor");
  std::memcpy(static_cast<char*>(t.data) + offset, src, n);
}

void CpuBackend::get_tensor(const Tensor& t, void* dst, size_t offset, size_t n) {
  check_range(t, offset, n, "cpu get_tensor");
  std::memcpy(dst, static_cast<const char*>(t.data) + offset, n);
}

bool CpuBackend::supports_op(const Tensor& node) const {
  if (op_is_view(node.op) || node.op == Op::NONE) return true;
  return cpu::kernel_table()[static_cast<size_t>(node.op)] != nullptr;
}

void CpuBackend::join(std::shared_ptr<Collective> group, int rank) {
  if (!group || rank < 0 || rank >= group->n_ranks())
    throw std::invalid_argument(fmt::format("cpu: rank {} outside the tensor-parallel group of {}", rank,
                                            group ? group->n_ranks() : 0));
  group_ = std::move(group);
  rank_ = rank;
}

void CpuBackend::compute(Graph& g) {
  cpu::KernelContext kc{*pool_, group_.get(), rank_};
  const auto& table = cpu::kernel_table();
  for (Tensor* t : g.nodes()) {
    if (op_is_view(t->op)) continue;
    cpu::Kernel k = table[static_cast<size_t>(t->op)];
    if (!k) throw OpError(fmt::format("cpu: no kernel for {} (node {}); fused ops must be lowered first",
                                      op_name(t->op), describe(*t)));
    if (!t->data) throw std::logic_error(fmt::format("cpu: node {} has no storage", describe(*t)));
    k(kc, *t);
  }
}

namespace cpu {

const std::array<Kernel, kOpCount>& kernel_table() {
  static const std::array<Kernel, kOpCount> table = [] {
    std::array<Kernel, kOpCount> t{};
    auto set = [&t](Op op, Kernel k) { t[static_cast<size_t>(op)] = k; };
    set(Op::CPY, k_cpy);
    set(Op::GET_ROWS, k_get_rows);
    set(Op::ADD, k_add);
    set(Op::MUL, k_mul);
    set(Op::SCALE, k_scale);
    set(Op::RMS_NORM, k_rms_norm);
    set(Op::MUL_MAT, k_mul_mat);
    set(Op::ROPE, k_rope);
    set(Op::SOFT_MAX, k_soft_max);
    set(Op::SILU, k_silu);
    set(Op::SWIGLU, k_swiglu);
    set(Op::ATTENTION, k_attention);
    set(Op::KV_STORE, k_kv_store);
    set(Op::CONCAT, k_concat);
    set(Op::ARGMAX, k_argmax);
    set(Op::TOP_K, k_top_k);
    set(Op::MUL_MAT_ID, k_mul_mat_id);
    set(Op::ALL_REDUCE, k_all_reduce);
    set(Op::ALL_GATHER, k_all_gather);
    return t;
  }();
  return table;
}

std::vector<int32_t> read_i32(const Tensor& t) {
  if (t.type != DType::I32 || !t.is_contiguous())
    throw OpError(fmt::format("expected a contiguous I32 tensor, got {}", describe(t)));
  std::vector<int32_t> v(static_cast<size_t>(t.nelements()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

}  // namespace cpu
}  // namespace minfer
