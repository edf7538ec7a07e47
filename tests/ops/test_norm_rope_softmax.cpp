// rms_norm, rope (both modes, the spec example, the architecture table), soft_max with causal mask.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_harness.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/ops.h"
#include "ref.h"

namespace minfer::test {
namespace {

CpuBackend& cpu() {
  static CpuBackend b(2);
  return b;
}

TEST(OpNorm, RmsNormSizesDtypesWeightAndViews) {
  for (int64_t n : {1, 7, 33, 4097})
    for (DType t : {DType::F32, DType::F16})
      for (bool with_w : {false, true}) {
        Tensor *x = nullptr, *w = nullptr;
        const float eps = 1e-6f;
        LeafData data;
        auto r = run_op(cpu(), [&](Context& c) {
          Tensor* base = c.new_tensor(t, {n + 3, 5, 2});
          x = slice(c, base, 0, 0, n);  // strided rows
          if (with_w) w = c.new_tensor(DType::F32, {n});
          return ops::rms_norm(c, x, eps, with_w ? w : nullptr);
        }, data);
        Nd X(*x);
        std::vector<double> e;
        for (int64_t r2 = 0; r2 < 2; ++r2)
          for (int64_t r1 = 0; r1 < 5; ++r1) {
            double ss = 0;
            for (int64_t i = 0; i < n; ++i) ss += X.at(i, r1, r2) * X.at(i, r1, r2);
            const double inv = 1.0 / std::sqrt(ss / n + eps);
            for (int64_t i = 0; i < n; ++i)
              e.push_back(X.at(i, r1, r2) * inv * (with_w ? static_cast<const float*>(w->data)[i] : 1.0));
          }
        expect_close(r.values, e, 1e-11, "rms_norm n=" + std::to_string(n));
      }
}

// Independent reference: rotate pairs per the mode's definition, in double.
std::vector<double> rope_ref(const Nd& X, const std::vector<int32_t>& pos, int n_rot, bool neox, double base) {
  std::vector<double> out;
  const int64_t hd = X.ne[0];
  for (int64_t t = 0; t < X.ne[2]; ++t)
    for (int64_t h = 0; h < X.ne[1]; ++h) {
      std::vector<double> v(static_cast<size_t>(hd));
      for (int64_t i = 0; i < hd; ++i) v[static_cast<size_t>(i)] = X.at(i, h, t);
      for (int k = 0; k < n_rot / 2; ++k) {
        const double ang = pos[static_cast<size_t>(t)] * std::pow(base, -2.0 * k / n_rot);
        const size_t a = neox ? k : 2 * k, b = neox ? k + n_rot / 2 : 2 * k + 1;
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * std::cos(ang) - x1 * std::sin(ang);
        v[b] = x0 * std::sin(ang) + x1 * std::cos(ang);
      }
      out.insert(out.end(), v.begin(), v.end());
    }
  return out;
}

std::vector<float> run_rope_once(const std::vector<float>& x, int32_t position, ops::RopeMode mode) {
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = position;
    else std::copy(x.begin(), x.end(), static_cast<float*>(leaf.data));
  });
  ops::RopeParams p;
  p.mode = mode;
  p.freq_base = 1e4f;
  return run_op(cpu(), [&](Context& c) {
    return ops::rope(c, c.new_tensor(DType::F32, {4, 1, 1}), c.new_tensor(DType::I32, {1}), p);
  }, data).values;
}

TEST(OpRope, SpecExampleBothModes) {
  // head_dim 4, freq_base 1e4, position 1, x = [1, 2, 3, 4].
  const std::vector<float> x{1, 2, 3, 4};
  const auto neox = run_rope_once(x, 1, ops::RopeMode::NEOX);
  const float en[] = {-1.9841f, 1.9599f, 2.4624f, 4.0198f};
  const auto norm = run_rope_once(x, 1, ops::RopeMode::NORMAL);
  const float eo[] = {-1.1426f, 1.9221f, 2.9599f, 4.0298f};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(neox[static_cast<size_t>(i)], en[i], 1e-4) << "NEOX element " << i;
    EXPECT_NEAR(norm[static_cast<size_t>(i)], eo[i], 1e-4) << "NORMAL element " << i;
  }
}

TEST(OpRope, RandomHeadsPositionsModesAndPartialRotation) {
  for (auto mode : {ops::RopeMode::NEOX, ops::RopeMode::NORMAL})
    for (int64_t hd : {4, 64, 128})
      for (int n_rot : {0, 2}) {
        const int rot = n_rot == 0 ? static_cast<int>(hd) : static_cast<int>(hd / 2);
        Tensor *x = nullptr, *pos = nullptr;
        LeafData data([&](Tensor& leaf) {
          if (leaf.type == DType::I32)
            for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, 5000));
          else fill_random(leaf);
        });
        ops::RopeParams p;
        p.mode = mode;
        p.n_rot = rot;
        p.freq_base = 1e6f;
        auto r = run_op(cpu(), [&](Context& c) {
          Tensor* base = c.new_tensor(DType::F32, {hd * 5, 7});  // q heads as a strided view of a fused row
          x = view(c, base, {hd, 3, 7}, {static_cast<size_t>(hd) * 4, base->nb[1]}, static_cast<size_t>(hd) * 4);
          pos = c.new_tensor(DType::I32, {7});
          return ops::rope(c, x, pos, p);
        }, data);
        // f32 angles at positions up to 5000 lose ~1e-4 relative; the reference is double.
        expect_close(r.values, rope_ref(Nd(*x), ints(*pos), rot, mode == ops::RopeMode::NEOX, 1e6), 1e-8,
                     "rope hd=" + std::to_string(hd));
      }
}

TEST(OpSoftMax, ScaleAndCausalMask) {
  for (int64_t n : {1, 7, 33, 4097})
    for (bool causal : {false, true}) {
      Tensor *x = nullptr, *pos = nullptr;
      const int64_t rows = 5;
      const float scale = 0.37f;
      LeafData data([&](Tensor& leaf) {
        if (leaf.type == DType::I32)
          for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, n - 1));
        else fill_random(leaf);
      });
      auto r = run_op(cpu(), [&](Context& c) {
        x = c.new_tensor(DType::F32, {n, rows, 2});
        pos = causal ? c.new_tensor(DType::I32, {rows}) : nullptr;
        return ops::soft_max(c, x, scale, pos);
      }, data);
      Nd X(*x);
      std::vector<double> e;
      auto p = causal ? ints(*pos) : std::vector<int32_t>();
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t row = 0; row < rows; ++row) {
          const int64_t vis = causal ? p[static_cast<size_t>(row)] + 1 : n;
          double mx = -1e300, sum = 0;
          for (int64_t i = 0; i < vis; ++i) mx = std::max(mx, scale * X.at(i, row, h));
          for (int64_t i = 0; i < vis; ++i) sum += std::exp(scale * X.at(i, row, h) - mx);
          for (int64_t i = 0; i < n; ++i) e.push_back(i < vis ? std::exp(scale * X.at(i, row, h) - mx) / sum : 0.0);
        }
      expect_close(r.values, e, 1e-11, "soft_max n=" + std::to_string(n));
    }
}

}  // namespace
}  // namespace minfer::test
