// CPU kernel table and helpers shared by the kernel files (internal to ops/cpu).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ops/cpu/thread_pool.h"
#include "tensor/fp16.h"
#include "tensor/tensor.h"

namespace minfer {
class Collective;
}

namespace minfer::cpu {

struct KernelContext {
  ThreadPool& pool;
  Collective* group = nullptr;  ///< the backend's tensor-parallel group (Backend::join), or none
  int rank = 0;
};

/// Computes `dst` from its sources. Throws OpError for operands the kernel cannot handle.
using Kernel = void (*)(KernelContext&, Tensor& dst);

/// One entry per Op; nullptr means the op needs no kernel (views) or is not supported (fused ops:
/// they are lowered to basic ops before compute).
const std::array<Kernel, kOpCount>& kernel_table();

// Kernels, one per op (defined in k_*.cpp).
void k_get_rows(KernelContext&, Tensor&);
void k_add(KernelContext&, Tensor&);
void k_mul(KernelContext&, Tensor&);
void k_scale(KernelContext&, Tensor&);
void k_silu(KernelContext&, Tensor&);
void k_swiglu(KernelContext&, Tensor&);
void k_concat(KernelContext&, Tensor&);
void k_cpy(KernelContext&, Tensor&);
void k_argmax(KernelContext&, Tensor&);
void k_rms_norm(KernelContext&, Tensor&);
void k_soft_max(KernelContext&, Tensor&);
void k_rope(KernelContext&, Tensor&);
void k_mul_mat(KernelContext&, Tensor&);
void k_kv_store(KernelContext&, Tensor&);
void k_attention(KernelContext&, Tensor&);
void k_top_k(KernelContext&, Tensor&);
void k_mul_mat_id(KernelContext&, Tensor&);
void k_all_reduce(KernelContext&, Tensor&);
void k_all_gather(KernelContext&, Tensor&);

// ---- element access helpers ----

/// Reads element i0 of a row of f32 or f16.
inline float load_f(const Tensor& t, const char* row, int64_t i0) {
  if (t.type == DType::F32) return *reinterpret_cast<const float*>(row + i0 * t.nb[0]);
  return f16_to_f32(*reinterpret_cast<const uint16_t*>(row + i0 * t.nb[0]));
}

inline const char* row_ptr(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<const char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
inline char* row_ptr(Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

/// Calls fn(i1, i2, i3) for every row of `t`, rows split across the pool.
template <typename F>
void for_each_row(KernelContext& kc, const Tensor& t, int64_t grain, F&& fn) {
  const int64_t n1 = t.ne[1], n2 = t.ne[2];
  kc.pool.parallel_for(t.nrows(), grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) fn(r % n1, (r / n1) % n2, r / (n1 * n2));
  });
}

/// Reads a contiguous I32 tensor's values.
std::vector<int32_t> read_i32(const Tensor& t);

}  // namespace minfer::cpu
