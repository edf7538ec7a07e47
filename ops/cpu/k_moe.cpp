// Mixture-of-experts kernels: TOP_K (routing) and MUL_MAT_ID (the expert matmul).
//
// MUL_MAT_ID groups the (token, slot) pairs by expert, then runs each expert like k_mul_mat runs
// a weight: activations converted once into the weight's vec_dot_type, one vec_dot per (row,
// pair). The conversion and the dot are the ones mul_mat uses, so every pair gets mul_mat's bits.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/cpu/kernels.h"
#include "tensor/quants.h"

namespace minfer::cpu {
namespace {

// As in k_matmul.cpp: this many activation rows stay hot while a block of weight rows streams.
constexpr int64_t kColTile = 8;

}  // namespace

void k_top_k(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const int64_t n = x.ne[0], k = dst.ne[0];
  for_each_row(kc, x, 16, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* row = row_ptr(x, i1, i2, i3);
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = load_f(x, row, i);
    std::vector<int32_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    // The documented total order: NaN first, then larger values, then the lower index.
    auto before = [&](int32_t a, int32_t b) {
      const float va = v[static_cast<size_t>(a)], vb = v[static_cast<size_t>(b)];
      const bool na = std::isnan(va), nb = std::isnan(vb);
      if (na || nb) return na && (!nb || a < b);
      return va > vb || (va == vb && a < b);
    };
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
    auto* out = reinterpret_cast<int32_t*>(row_ptr(dst, i1, i2, i3));
    std::copy(idx.begin(), idx.begin() + k, out);
  });
}

void k_mul_mat_id(KernelContext& kc, Tensor& dst) {
  const Tensor& as = *dst.src[0];
  const Tensor& ids = *dst.src[1];
  const Tensor& b = *dst.src[2];
  const int64_t K = as.ne[0], M = as.ne[1], n_expert = as.ne[2];
  const int64_t k = ids.ne[0], n_tokens = ids.ne[1], n_act = b.ne[1];

  // Group the (slot j, token t) pairs by expert: pairs[offs[e], offs[e + 1]) hold j + k * t.
  std::vector<int64_t> offs(static_cast<size_t>(n_expert) + 1, 0);
  std::vector<int32_t> expert(static_cast<size_t>(k * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = *reinterpret_cast<const int32_t*>(static_cast<const char*>(ids.data) + j * ids.nb[0] +
                                                          t * ids.nb[1]);
      if (e < 0 || e >= n_expert)
        throw OpError(fmt::format("MUL_MAT_ID: id {} of slot {} of token {} outside [0, {}) of {}", e, j, t, n_expert,
                                  describe(as)));
      expert[static_cast<size_t>(j + k * t)] = e;
      ++offs[static_cast<size_t>(e) + 1];
    }
  std::partial_sum(offs.begin(), offs.end(), offs.begin());
  std::vector<int64_t> pairs(expert.size()), fill(offs.begin(), offs.end() - 1);
  for (size_t s = 0; s < expert.size(); ++s) pairs[static_cast<size_t>(fill[static_cast<size_t>(expert[s])]++)] = static_cast<int64_t>(s);

  // Convert the activations once, row by row exactly as k_mul_mat does.
  const DType vt = vec_dot_type(as.type);
  const size_t act_row = dtype_row_size(vt, K);
  thread_local std::vector<uint8_t> act;  // per calling thread, grown, never shrunk (as k_mul_mat)
  act.resize(static_cast<size_t>(n_act * n_tokens) * act_row);
  uint8_t* const act_buf = act.data();
  kc.pool.parallel_for(n_act * n_tokens, 4, [&](int64_t lo, int64_t hi) {
    std::vector<float> tmp(static_cast<size_t>(K));
    for (int64_t r = lo; r < hi; ++r) {
      const char* row = row_ptr(b, r % n_act, r / n_act, 0);
      const float* src;
      if (b.type == DType::F32 && b.nb[0] == 4) {
        src = reinterpret_cast<const float*>(row);
      } else {
        for (int64_t i = 0; i < K; ++i) tmp[static_cast<size_t>(i)] = load_f(b, row, i);
        src = tmp.data();
      }
      quantize_row_activations(vt, src, act_buf + static_cast<size_t>(r) * act_row, K);
    }
  });

  // Jobs: blocks of one expert's weight rows, sized as k_mul_mat sizes them for that expert's pairs.
  struct Job {
    int64_t e, m0, m1;
  };
  std::vector<Job> jobs;
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t np = offs[static_cast<size_t>(e) + 1] - offs[static_cast<size_t>(e)];
    if (np == 0) continue;  // an expert no token selected costs nothing
    const int64_t row_block = std::max<int64_t>(16, (int64_t{1} << 16) / std::max<int64_t>(1, K * np));
    for (int64_t m0 = 0; m0 < M; m0 += row_block) jobs.push_back({e, m0, std::min(M, m0 + row_block)});
  }
  const VecDotFn dot = vec_dot_function(as.type);
  kc.pool.parallel_for(static_cast<int64_t>(jobs.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t ji = lo; ji < hi; ++ji) {
      const Job& jb = jobs[static_cast<size_t>(ji)];
      const int64_t p0 = offs[static_cast<size_t>(jb.e)], p1 = offs[static_cast<size_t>(jb.e) + 1];
      for (int64_t q0 = p0; q0 < p1; q0 += kColTile) {
        const int64_t q1 = std::min(p1, q0 + kColTile);
        for (int64_t m = jb.m0; m < jb.m1; ++m) {
          const void* wrow = row_ptr(as, m, jb.e, 0);
          for (int64_t q = q0; q < q1; ++q) {
            const int64_t s = pairs[static_cast<size_t>(q)], j = s % k, t = s / k;
            const uint8_t* arow = act_buf + static_cast<size_t>(j % n_act + n_act * t) * act_row;
            reinterpret_cast<float*>(row_ptr(dst, j, t, 0))[m] = dot(K, wrow, arow);
          }
        }
      }
    }
  });
}

}  // namespace minfer::cpu
