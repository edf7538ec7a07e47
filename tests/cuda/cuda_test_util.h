// Shared helpers of the CUDA tests: the backends, the visible skip without a GPU, and the
// CUDA-vs-CPU comparison on shared random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include <fmt/format.h>

#include "common/op_harness.h"
#include "common/test_util.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cuda/cuda_backend.h"
#include "tensor/quants.h"

namespace minfer::test {

inline CpuBackend& cpu() {
  static CpuBackend b(2);
  return b;
}

/// The CUDA backend on device 0, or nullptr when this machine has no usable GPU.
inline CudaBackend* gpu() {
  static std::unique_ptr<CudaBackend> b = cuda::device_count() > 0 ? std::make_unique<CudaBackend>(0) : nullptr;
  return b.get();
}

#define MINFER_REQUIRE_GPU()                      \
  do {                                            \
    if (!::minfer::test::gpu()) {                 \
      GTEST_SKIP() << "no CUDA device";           \
    }                                             \
  } while (0)

/// Runs `build` on the CPU and on CUDA with the same inputs and checks nmse(cuda, cpu) <= tol.
/// Returns the CUDA values.
inline std::vector<float> compare_cpu_cuda(const BuildFn& build, LeafData& data, double tol, const std::string& what) {
  auto ref = run_op(cpu(), build, data);
  auto got = run_op(*gpu(), build, data);
  expect_close(got.values, ref.values, tol, "cuda vs cpu: " + what);
  return got.values;
}

/// Inputs keyed by leaf name instead of leaf order: a backend that lowers a fused op orders the
/// graph's leaves differently from one that runs it fused. Every leaf must have a unique name.
/// `special` may fill a leaf itself (return true), e.g. positions.
/// Leaves named "w..." (weights) get stddev 1/sqrt(ne0), so products stay O(1) through a layer;
/// everything else N(0, 1).
inline InitFn named_init(std::function<bool(Tensor&)> special = nullptr) {
  const uint64_t base = seed();
  return [base, special](Tensor& leaf) {
    if (special && special(leaf)) return;
    if (leaf.name.empty()) throw std::logic_error("named_init: unnamed leaf " + describe(leaf));
    std::mt19937_64 gen(base ^ std::hash<std::string>{}(leaf.name));
    const float sd = leaf.name[0] == 'w' ? 1.0f / std::sqrt(static_cast<float>(leaf.ne[0])) : 1.0f;
    std::normal_distribution<float> nd(0.0f, sd);
    const int64_t k = leaf.ne[0], rows = leaf.nrows();
    std::vector<float> v(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : v) x = nd(gen);
      quantize_row(leaf.type, v.data(), static_cast<char*>(leaf.data) + r * leaf.row_size(), k);
    }
  };
}

/// compare_cpu_cuda with named_init inputs (fresh LeafData per backend).
inline std::vector<float> compare_cpu_cuda_named(const BuildFn& build, const InitFn& init, double tol,
                                                 const std::string& what) {
  LeafData a(init), b(init);
  auto ref = run_op(cpu(), build, a);
  auto got = run_op(*gpu(), build, b);
  expect_close(got.values, ref.values, tol, "cuda vs cpu: " + what);
  return got.values;
}

/// Tolerance of a CUDA-vs-CPU comparison: the CPU reference is itself rounded, so quantized
/// paths (different activation quantization on each side) get twice the per-dtype allowance.
inline double cuda_tolerance(DType limiting) {
  switch (limiting) {
    case DType::F32: return 1e-10;
    case DType::F16: return 1e-8;
    case DType::BF16: return 1e-8;
    default: return 5e-4;
  }
}

}  // namespace minfer::test
