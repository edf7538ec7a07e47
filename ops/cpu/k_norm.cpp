// Row-wise kernels: rms_norm, soft_max, rope.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/rope.h"

namespace minfer::cpu {

void k_rms_norm(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const Tensor* w = dst.src[1];
  const float eps = dst.param<float>(0);
  const int64_t n = x.ne[0];
  for_each_row(kc, dst, 8, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* rx = row_ptr(x, i1, i2, i3);
    float* rd = reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3));
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float v = load_f(x, rx, i);
      sum += v * v;
    }
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      float v = load_f(x, rx, i) * inv;
      if (w) v *= load_f(*w, static_cast<const char*>(w->data), i);
      rd[i] = v;
    }
  });
}

void k_soft_max(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const Tensor* pos_t = dst.src[1];
  const float scale = dst.param<float>(0);
  std::vector<int32_t> pos;
  if (pos_t) pos = read_i32(*pos_t);
  const int64_t n = x.ne[0];
  for_each_row(kc, dst, 8, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* rx = row_ptr(x, i1, i2, i3);
    float* rd = reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3));
    int64_t n_vis = n;
    if (pos_t) {
      const int32_t p = pos[static_cast<size_t>(i1)];
      if (p < 0) throw OpError(fmt::format("SOFT_MAX: negative position {} in row {}", p, i1));
      n_vis = std::min<int64_t>(n, static_cast<int64_t>(p) + 1);
    }
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n_vis; ++i) mx = std::max(mx, scale * load_f(x, rx, i));
    float sum = 0.0f;
    for (int64_t i = 0; i < n_vis; ++i) {
      const float e = std::exp(scale * load_f(x, rx, i) - mx);
      rd[i] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n_vis; ++i) rd[i] *= inv;
    for (int64_t i = n_vis; i < n; ++i) rd[i] = 0.0f;
  });
}

void k_rope(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const std::vector<int32_t> pos = read_i32(*dst.src[1]);
  const Tensor* ff = dst.src[2];
  const ops::RopeParams p = ops::rope_params_of(dst);
  const ops::RopeCorrDims corr = ops::rope_corr_dims(p);
  const int64_t hd = x.ne[0];
  const int64_t half = p.n_rot / 2;
  // theta_k per ops/rope.h, in double: at positions in the thousands an f32 angle is off by
  // ~1e-4 rad, visible against float64 references.
  std::vector<double> theta(static_cast<size_t>(half));
  for (int64_t k = 0; k < half; ++k)
    theta[static_cast<size_t>(k)] =
        ops::rope_theta(static_cast<int>(k), p.n_rot, p.freq_base, p.freq_scale, p.ext_factor, corr,
                        ff ? static_cast<double>(static_cast<const float*>(ff->data)[k]) : 1.0);
  const double mscale = p.attn_factor;
  const bool neox = p.mode == ops::RopeMode::NEOX;
  for_each_row(kc, dst, 16, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* rx = row_ptr(x, i1, i2, i3);
    float* rd = reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3));
    const double position = pos[static_cast<size_t>(i2)];
    // Read the whole head first: dst may alias x (in-place).
    float buf[1024];
    std::vector<float> big;
    float* v = buf;
    if (hd > 1024) {
      big.resize(static_cast<size_t>(hd));
      v = big.data();
    }
    for (int64_t i = 0; i < hd; ++i) v[i] = load_f(x, rx, i);
    for (int64_t k = 0; k < half; ++k) {
      const double ang = position * theta[static_cast<size_t>(k)];
      const float c = static_cast<float>(std::cos(ang) * mscale), s = static_cast<float>(std::sin(ang) * mscale);
      const int64_t a = neox ? k : 2 * k;
      const int64_t b = neox ? k + half : 2 * k + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
    for (int64_t i = 0; i < hd; ++i) rd[i] = v[i];
  });
}

}  // namespace minfer::cpu
