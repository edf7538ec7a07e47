// The tensor-parallel collectives' kernels: the backend's group (Backend::join) does the
// exchange; these kernels gather the (possibly strided) source first and lay out the result.
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "ops/cpu/kernels.h"
#include "tensor/collective.h"

namespace minfer::cpu {

// The source gathered into dst (contiguous f32), then summed over the group in place.
void k_all_reduce(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  for_each_row(kc, x, 8, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* in = row_ptr(x, i1, i2, i3);
    auto* out = reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3));
    for (int64_t i = 0; i < x.ne[0]; ++i) out[i] = *reinterpret_cast<const float*>(in + i * x.nb[0]);
  });
  if (kc.group) kc.group->all_reduce_sum(kc.rank, static_cast<float*>(dst.data), static_cast<size_t>(dst.nelements()));
}

// The source made contiguous, the ranks' copies gathered rank after rank (the collective's flat
// layout, [n0, rows] per rank), then each dst row put together from the ranks' pieces of it.
void k_all_gather(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const int n_ranks = dst.param<int32_t>(0);
  const int group_ranks = kc.group ? kc.group->n_ranks() : 1;
  if (n_ranks != group_ranks)
    throw OpError(fmt::format("ALL_GATHER: {} gathers over {} ranks, but the backend's tensor-parallel group has {}",
                              describe(dst), n_ranks, group_ranks));
  const int64_t n0 = x.ne[0], n1 = x.ne[1], n2 = x.ne[2];
  const auto n = static_cast<size_t>(x.nelements());
  std::vector<float> part(n);
  for_each_row(kc, x, 8, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* in = row_ptr(x, i1, i2, i3);
    float* out = part.data() + (i1 + n1 * (i2 + n2 * i3)) * n0;
    for (int64_t i = 0; i < n0; ++i) out[i] = *reinterpret_cast<const float*>(in + i * x.nb[0]);
  });
  std::vector<float> all;
  if (kc.group) {
    all.resize(n * static_cast<size_t>(n_ranks));
    kc.group->all_gather(kc.rank, part.data(), n, all.data());
  } else {
    all = std::move(part);
  }
  for_each_row(kc, dst, 8, [&](int64_t i1, int64_t i2, int64_t i3) {
    const auto row = static_cast<size_t>((i1 + n1 * (i2 + n2 * i3)) * n0);
    auto* out = reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3));
    for (int r = 0; r < n_ranks; ++r)
      std::memcpy(out + r * n0, all.data() + static_cast<size_t>(r) * n + row, static_cast<size_t>(n0) * sizeof(float));
  });
}

}  // namespace minfer::cpu
