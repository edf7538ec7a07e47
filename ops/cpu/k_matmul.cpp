// MUL_MAT on the CPU: out[n][m] = dot(a row m, b row n).
//
// Activations are converted once per matmul into the weight type's vec_dot_type (Q8_0 / Q8_1 /
// Q8_K for block weights, f32 for float weights), then every (row, column) pair is one vec_dot
// (tensor/quants.h). F32 weights with contiguous operands go through Eigen's GEMM.
#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "ops/cpu/kernels.h"
#include "tensor/quants.h"

namespace minfer::cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Column tile: this many activation rows stay hot in cache while a block of weight rows streams.
constexpr int64_t kColTile = 8;

}  // namespace

void k_mul_mat(KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int64_t K = a.ne[0], M = a.ne[1];
  const int64_t N = b.ne[1], B2 = b.ne[2], B3 = b.ne[3];
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];

  // Eigen path: f32 weights and f32 activations, both with contiguous rows.
  if (a.type == DType::F32 && b.type == DType::F32 && a.nb[0] == 4 && b.nb[0] == 4) {
    kc.pool.parallel_for(B2 * B3 * ((M + 63) / 64), 1, [&](int64_t lo, int64_t hi) {
      const int64_t mblocks = (M + 63) / 64;
      for (int64_t job = lo; job < hi; ++job) {
        const int64_t mb = job % mblocks, bi = job / mblocks;
        const int64_t i2 = bi % B2, i3 = bi / B2;
        const int64_t m0 = mb * 64, mn = std::min<int64_t>(64, M - m0);
        using Stride = Eigen::OuterStride<>;
        Eigen::Map<const RowMat, 0, Stride> A(reinterpret_cast<const float*>(row_ptr(a, m0, i2 / r2, i3 / r3)), mn, K,
                                              Stride(static_cast<int64_t>(a.nb[1] / 4)));
        Eigen::Map<const RowMat, 0, Stride> Bm(reinterpret_cast<const float*>(row_ptr(b, 0, i2, i3)), N, K,
                                               Stride(static_cast<int64_t>(b.nb[1] / 4)));
        Eigen::Map<RowMat, 0, Stride> C(reinterpret_cast<float*>(row_ptr(dst, 0, i2, i3)) + m0, N, mn,
                                        Stride(static_cast<int64_t>(dst.nb[1] / 4)));
        C.noalias() = Bm * A.transpose();
      }
    });
    return;
  }

  // Convert the activations once.
  const DType vt = vec_dot_type(a.type);
  const size_t act_row = dtype_row_size(vt, K);
  // Kept per calling thread across calls (grown, never shrunk): no allocation per matmul. The
  // workers reach it through act_buf: inside the lambdas `act` would name their own thread_local.
  thread_local std::vector<uint8_t> act;
  act.resize(static_cast<size_t>(N * B2 * B3) * act_row);
  uint8_t* const act_buf = act.data();
  kc.pool.parallel_for(N * B2 * B3, 4, [&](int64_t lo, int64_t hi) {
    std::vector<float> tmp(static_cast<size_t>(K));
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t n = r % N, i2 = (r / N) % B2, i3 = r / (N * B2);
      const char* row = row_ptr(b, n, i2, i3);
      const float* src;
      if (b.type == DType::F32 && b.nb[0] == 4) {
        src = reinterpret_cast<const float*>(row);
      } else {
        for (int64_t k = 0; k < K; ++k) tmp[static_cast<size_t>(k)] = load_f(b, row, k);
        src = tmp.data();
      }
      quantize_row_activations(vt, src, act_buf + static_cast<size_t>(r) * act_row, K);
    }
  });

  // Rows of the weight in blocks; each block runs all columns tile by tile. The kernel is looked up
  // once: vec_dot() would re-check its arguments for every (row, column) pair. A block holds at
  // least ~64k multiply-adds so that waking threads never costs more than the work.
  const VecDotFn dot = vec_dot_function(a.type);
  const int64_t row_block = std::max<int64_t>(16, (int64_t{1} << 16) / std::max<int64_t>(1, K * N));
  const int64_t mblocks = (M + row_block - 1) / row_block;
  kc.pool.parallel_for(B2 * B3 * mblocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t job = lo; job < hi; ++job) {
      const int64_t mb = job % mblocks, bi = job / mblocks;
      const int64_t i2 = bi % B2, i3 = bi / B2;
      const int64_t m0 = mb * row_block, m1 = std::min(M, m0 + row_block);
      for (int64_t n0 = 0; n0 < N; n0 += kColTile) {
        const int64_t n1 = std::min(N, n0 + kColTile);
        for (int64_t m = m0; m < m1; ++m) {
          const void* wrow = row_ptr(a, m, i2 / r2, i3 / r3);
          for (int64_t n = n0; n < n1; ++n) {
            const uint8_t* arow = act_buf + static_cast<size_t>(n + N * (i2 + B2 * i3)) * act_row;
            reinterpret_cast<float*>(row_ptr(dst, n, i2, i3))[m] = dot(K, wrow, arow);
          }
        }
      }
    }
  });
}

}  // namespace minfer::cpu
