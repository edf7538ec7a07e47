// Element-wise and data-movement kernels: get_rows, add, mul, scale, silu, swiglu, concat,
// cpy, argmax. Inputs may be strided views; outputs are contiguous f32 unless stated.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cpu/kernels.h"
#include "tensor/quants.h"

namespace minfer::cpu {
namespace {

template <typename F>
void binary_bcast(KernelContext& kc, Tensor& dst, F op) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  for_each_row(kc, dst, 16, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* ra = row_ptr(a, i1, i2, i3);
    const char* rb = row_ptr(b, i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
    float* rd = reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3));
    const int64_t n = dst.ne[0], nb0 = b.ne[0];
    if (a.type == DType::F32 && b.type == DType::F32 && a.nb[0] == 4 && b.nb[0] == 4) {
      const float* fa = reinterpret_cast<const float*>(ra);
      const float* fb = reinterpret_cast<const float*>(rb);
      if (nb0 == n)
        for (int64_t i = 0; i < n; ++i) rd[i] = op(fa[i], fb[i]);
      else
        for (int64_t i = 0; i < n; ++i) rd[i] = op(fa[i], fb[i % nb0]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) rd[i] = op(load_f(a, ra, i), load_f(b, rb, i % nb0));
  });
}

template <typename F>
void unary(KernelContext& kc, Tensor& dst, F op) {
  const Tensor& a = *dst.src[0];
  for_each_row(kc, dst, 16, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* ra = row_ptr(a, i1, i2, i3);
    float* rd = reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3));
    for (int64_t i = 0; i < dst.ne[0]; ++i) rd[i] = op(load_f(a, ra, i));
  });
}

inline float silu_f(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

void k_add(KernelContext& kc, Tensor& dst) { binary_bcast(kc, dst, [](float x, float y) { return x + y; }); }
void k_mul(KernelContext& kc, Tensor& dst) { binary_bcast(kc, dst, [](float x, float y) { return x * y; }); }

void k_scale(KernelContext& kc, Tensor& dst) {
  const float s = dst.param<float>(0);
  unary(kc, dst, [s](float x) { return x * s; });
}

void k_silu(KernelContext& kc, Tensor& dst) { unary(kc, dst, silu_f); }

void k_swiglu(KernelContext& kc, Tensor& dst) {
  binary_bcast(kc, dst, [](float g, float u) { return silu_f(g) * u; });
}

void k_get_rows(KernelContext& kc, Tensor& dst) {
  const Tensor& table = *dst.src[0];
  const Tensor& ids = *dst.src[1];
  const int64_t n_rows = table.ne[1];
  for_each_row(kc, dst, 8, [&](int64_t i1, int64_t i2, int64_t) {
    const int32_t id = *reinterpret_cast<const int32_t*>(static_cast<const char*>(ids.data) + i1 * ids.nb[0] +
                                                         i2 * ids.nb[1]);
    if (id < 0 || id >= n_rows)
      throw OpError(fmt::format("GET_ROWS: id {} outside [0, {}) of {}", id, n_rows, describe(table)));
    const char* row = row_ptr(table, id, table.ne[2] > 1 ? i2 : 0, 0);
    char* rd = row_ptr(dst, i1, i2, 0);
    if (table.type == DType::I32) std::memcpy(rd, row, static_cast<size_t>(table.ne[0]) * sizeof(int32_t));
    else dequantize_row(table.type, row, reinterpret_cast<float*>(rd), table.ne[0]);
  });
}

void k_concat(KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int dim = dst.param<int32_t>(0);
  for_each_row(kc, dst, 16, [&](int64_t i1, int64_t i2, int64_t i3) {
    float* rd = reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3));
    const int64_t idx[4] = {0, i1, i2, i3};
    for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0) {
      int64_t j[4] = {i0, idx[1], idx[2], idx[3]};
      const Tensor* s = &a;
      if (j[dim] >= a.ne[dim]) {
        j[dim] -= a.ne[dim];
        s = &b;
      }
      rd[i0] = load_f(*s, row_ptr(*s, j[1], j[2], j[3]), j[0]);
    }
  });
}

void k_cpy(KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const int64_t n0 = a.ne[0];
  // dst is walked in its own row order; source rows map by flat element index, so shapes may differ
  // (a reshape-copy) as long as the element counts match.
  if (a.ne[0] != dst.ne[0]) {
    if (dtype_is_quantized(a.type) || dtype_is_quantized(dst.type))
      throw OpError("CPY: reshaping copies need float source and destination: " + describe(a) + " -> " + describe(dst));
    std::vector<float> src(static_cast<size_t>(a.nelements()));
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < a.ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
          const char* r = row_ptr(a, i1, i2, i3);
          for (int64_t i0 = 0; i0 < n0; ++i0) src[static_cast<size_t>(k++)] = a.type == DType::BF16
              ? bf16_to_f32(*reinterpret_cast<const uint16_t*>(r + i0 * a.nb[0]))
              : load_f(a, r, i0);
        }
    for_each_row(kc, dst, 16, [&](int64_t i1, int64_t i2, int64_t i3) {
      const int64_t r = i1 + dst.ne[1] * (i2 + dst.ne[2] * i3);
      quantize_row(dst.type, src.data() + r * dst.ne[0], row_ptr(dst, i1, i2, i3), dst.ne[0]);
    });
    return;
  }
  const int64_t d1 = dst.ne[1], d2 = dst.ne[2];
  for_each_row(kc, a, 8, [&](int64_t i1, int64_t i2, int64_t i3) {
    const int64_t r = i1 + a.ne[1] * (i2 + a.ne[2] * i3);
    char* out = row_ptr(dst, r % d1, (r / d1) % d2, r / (d1 * d2));
    const char* in = row_ptr(a, i1, i2, i3);
    if (a.type == dst.type && a.rows_contiguous()) {
      std::memcpy(out, in, a.row_size());
      return;
    }
    std::vector<float> tmp(static_cast<size_t>(n0));
    if (a.rows_contiguous()) {
      dequantize_row(a.type, in, tmp.data(), n0);
    } else {
      if (dtype_is_quantized(a.type)) throw OpError("CPY: strided block-quantized source " + describe(a));
      for (int64_t i0 = 0; i0 < n0; ++i0)
        tmp[static_cast<size_t>(i0)] = a.type == DType::BF16
                                           ? bf16_to_f32(*reinterpret_cast<const uint16_t*>(in + i0 * a.nb[0]))
                                           : load_f(a, in, i0);
    }
    if (dst.type == DType::Q8_0 || dst.type == DType::Q8_1 || dst.type == DType::Q8_K)
      quantize_row_activations(dst.type, tmp.data(), out, n0);
    else
      quantize_row(dst.type, tmp.data(), out, n0);
  });
}

void k_argmax(KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  kc.pool.parallel_for(a.nrows(), 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
      const char* row = row_ptr(a, i1, i2, i3);
      int32_t best = 0;
      float bv = load_f(a, row, 0);
      for (int64_t i = 1; i < a.ne[0] && !std::isnan(bv); ++i) {
        const float v = load_f(a, row, i);
        if (v > bv || std::isnan(v)) {
          bv = v;
          best = static_cast<int32_t>(i);
        }
      }
      static_cast<int32_t*>(dst.data)[r] = best;
    }
  });
}

}  // namespace minfer::cpu
