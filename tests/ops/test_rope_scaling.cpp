// RoPE scaling on the CPU against double-precision loops written from the published formulas
// (Transformers' modeling_rope_utils: _compute_linear_scaling_rope_parameters,
// _compute_yarn_parameters with truncate=True, _compute_llama3_parameters; ggml's ext_factor mix
// and freq_factors), over random head dims, partial rotation, both modes, bases, factors,
// original contexts, betas and positions up to 32k. The references build Transformers' inv_freq
// arrays and attention_factor and share no code with ops/rope.h.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

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

enum class Kind { LINEAR, YARN, LLAMA3 };

struct Case {
  Kind kind;
  int64_t hd;
  int n_rot;
  ops::RopeMode mode;
  double base, factor;
  int n_ctx_orig;
  double beta_fast = 32, beta_slow = 1;
  double ext_factor = 1;        // YaRN only; Transformers has 1, ggml any mix
  double attention_factor = 0;  // YaRN: <= 0 is Transformers' default get_mscale(factor)
  double low_freq = 1, high_freq = 4;  // llama3
};

// Transformers' default inv_freq: 1 / base^(2k/dim), k < dim/2.
std::vector<double> inv_freq_default(int dim, double base) {
  std::vector<double> f(static_cast<size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) f[static_cast<size_t>(i)] = 1.0 / std::pow(base, 2.0 * i / dim);
  return f;
}

// _compute_yarn_parameters (truncate=True), with ggml's ext_factor scaling the extrapolation mix.
std::vector<double> inv_freq_yarn(const Case& c, double* attention_factor) {
  const int dim = c.n_rot;
  auto find_correction_dim = [&](double num_rotations) {
    return (dim * std::log(c.n_ctx_orig / (num_rotations * 2 * std::numbers::pi))) / (2 * std::log(c.base));
  };
  double low = std::floor(find_correction_dim(c.beta_fast));
  double high = std::ceil(find_correction_dim(c.beta_slow));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's singularity guard
  const auto extrap = inv_freq_default(dim, c.base);
  std::vector<double> f(extrap.size());
  for (size_t i = 0; i < f.size(); ++i) {
    const double interp = extrap[i] / c.factor;
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = (1 - ramp) * c.ext_factor;
    f[i] = interp * (1 - extrapolation_factor) + extrap[i] * extrapolation_factor;
  }
  *attention_factor = c.attention_factor > 0 ? c.attention_factor : c.factor <= 1 ? 1.0 : 0.1 * std::log(c.factor) + 1.0;
  return f;
}

// _compute_llama3_parameters: wavelengths past the original context are divided by the factor,
// short ones kept, the band between smoothed.
std::vector<double> inv_freq_llama3(const Case& c) {
  const double low_freq_wavelen = c.n_ctx_orig / c.low_freq, high_freq_wavelen = c.n_ctx_orig / c.high_freq;
  auto f = inv_freq_default(c.n_rot, c.base);
  for (double& v : f) {
    const double wavelen = 2 * std::numbers::pi / v;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      v /= c.factor;
      continue;
    }
    const double smooth = (c.n_ctx_orig / wavelen - c.low_freq) / (c.high_freq - c.low_freq);
    v = (1 - smooth) * v / c.factor + smooth * v;
  }
  return f;
}

// The GGUF's rope_freqs.weight as llama.cpp's converter writes it (LlamaModel.generate_extra_tensors):
// the divisor of each default frequency.
std::vector<float> llama3_rope_freqs(const Case& c) {
  std::vector<float> r;
  const double low_freq_wavelen = c.n_ctx_orig / c.low_freq, high_freq_wavelen = c.n_ctx_orig / c.high_freq;
  for (double freq : inv_freq_default(c.n_rot, c.base)) {
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) r.push_back(1.0f);
    else if (wavelen > low_freq_wavelen) r.push_back(static_cast<float>(c.factor));
    else {
      const double smooth = (c.n_ctx_orig / wavelen - c.low_freq) / (c.high_freq - c.low_freq);
      r.push_back(static_cast<float>(1 / ((1 - smooth) / c.factor + smooth)));
    }
  }
  return r;
}

// Rotates every head by pos * inv_freq[k], cos/sin scaled by m (Transformers' attention_scaling).
std::vector<double> rotate_ref(const Nd& X, const std::vector<int32_t>& pos, int n_rot, bool neox,
                               const std::vector<double>& inv_freq, double m) {
  std::vector<double> out;
  const int64_t hd = X.ne[0];
  for (int64_t t = 0; t < X.ne[2]; ++t)
    for (int64_t h = 0; h < X.ne[1]; ++h) {
      std::vector<double> v(static_cast<size_t>(hd));
      for (int64_t i = 0; i < hd; ++i) v[static_cast<size_t>(i)] = X.at(i, h, t);
      for (int k = 0; k < n_rot / 2; ++k) {
        const double ang = pos[static_cast<size_t>(t)] * inv_freq[static_cast<size_t>(k)];
        const double c = std::cos(ang) * m, s = std::sin(ang) * m;
        const size_t a = neox ? k : 2 * k, b = neox ? k + n_rot / 2 : 2 * k + 1;
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
      out.insert(out.end(), v.begin(), v.end());
    }
  return out;
}

std::string describe_case(const Case& c) {
  const char* k = c.kind == Kind::LINEAR ? "linear" : c.kind == Kind::YARN ? "yarn" : "llama3";
  return fmt::format("{} hd={} n_rot={} mode={} base={} factor={} orig={} beta={}/{} ext={} attn={}", k, c.hd, c.n_rot,
                     static_cast<int>(c.mode), c.base, c.factor, c.n_ctx_orig, c.beta_fast, c.beta_slow, c.ext_factor,
                     c.attention_factor);
}

// The op's parameters for the case; `ref` gets the case with the values rounded as the op holds
// them (f32 base, factor, betas, magnitude), so the reference computes the same function.
ops::RopeParams op_params(const Case& c, Case* ref) {
  ops::RopeParams p;
  p.n_rot = c.n_rot;
  p.mode = c.mode;
  p.freq_base = static_cast<float>(c.base);
  *ref = c;
  ref->base = p.freq_base;
  if (c.kind == Kind::LLAMA3) return p;  // the factors travel as a tensor
  p.freq_scale = static_cast<float>(1 / c.factor);
  ref->factor = 1.0 / static_cast<double>(p.freq_scale);
  if (c.kind == Kind::YARN) {
    p.ext_factor = static_cast<float>(c.ext_factor);
    p.n_ctx_orig = c.n_ctx_orig;
    p.beta_fast = static_cast<float>(c.beta_fast);
    p.beta_slow = static_cast<float>(c.beta_slow);
    double m = 0;
    inv_freq_yarn(c, &m);
    p.attn_factor = static_cast<float>(m);
    ref->ext_factor = p.ext_factor;
    ref->beta_fast = p.beta_fast;
    ref->beta_slow = p.beta_slow;
    ref->attention_factor = p.attn_factor;
  }
  return p;
}

void check_case(const Case& c, bool strided) {
  const int64_t n_head = 3, T = 9;
  Case rc;
  const ops::RopeParams p = op_params(c, &rc);
  double m = 1;
  std::vector<double> inv_freq;
  std::vector<float> ff;
  if (c.kind == Kind::LINEAR) {
    inv_freq = inv_freq_default(c.n_rot, rc.base);
    for (double& v : inv_freq) v /= rc.factor;
  } else if (c.kind == Kind::YARN) {
    inv_freq = inv_freq_yarn(rc, &m);
  } else {
    // The converter's factors are Transformers' smoothing: inv_freq_default / ff == inv_freq_llama3
    // (checked in double); the op then divides by the f32-rounded factors the GGUF holds.
    const auto def = inv_freq_default(c.n_rot, rc.base), hf = inv_freq_llama3(rc);
    ff = llama3_rope_freqs(rc);
    inv_freq.resize(def.size());
    for (size_t k = 0; k < def.size(); ++k) {
      const double exact = def[k] / hf[k];
      EXPECT_NEAR(ff[k], exact, 1e-6 * exact) << describe_case(c) << " factor " << k;
      inv_freq[k] = def[k] / static_cast<double>(ff[k]);
    }
  }
  Tensor *x = nullptr, *pos = nullptr;
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32) {
      auto* q = static_cast<int32_t*>(leaf.data);
      for (int64_t i = 0; i < leaf.nelements(); ++i) q[i] = static_cast<int32_t>(rand_int(0, 32767));
      q[0] = 0;
      q[leaf.nelements() - 1] = 32767;
    } else if (leaf.name == "freq_factors") {
      std::copy(ff.begin(), ff.end(), static_cast<float*>(leaf.data));
    } else {
      fill_random(leaf);
    }
  });
  auto r = run_op(cpu(), [&](Context& ctx) {
    if (strided) {  // q heads as a strided view of a fused qkv row
      Tensor* base = ctx.new_tensor(DType::F32, {c.hd * (n_head + 2), T});
      x = view(ctx, base, {c.hd, n_head, T}, {static_cast<size_t>(c.hd) * 4, base->nb[1]}, static_cast<size_t>(c.hd) * 4);
    } else {
      x = ctx.new_tensor(DType::F32, {c.hd, n_head, T});
    }
    pos = ctx.new_tensor(DType::I32, {T});
    Tensor* f = c.kind == Kind::LLAMA3 ? ctx.new_tensor(DType::F32, {c.n_rot / 2}, "freq_factors") : nullptr;
    return ops::rope(ctx, x, pos, p, f);
  }, data);
  // Double angles, cos/sin rounded to f32 once: ~1e-7 relative per element.
  expect_close(r.values, rotate_ref(Nd(*x), ints(*pos), c.n_rot, c.mode == ops::RopeMode::NEOX, inv_freq, m), 1e-12,
               describe_case(c));
}

ops::RopeMode random_mode() { return rand_int(0, 1) ? ops::RopeMode::NEOX : ops::RopeMode::NORMAL; }

TEST(OpRopeScaling, LinearMatchesTransformers) {
  for (int i = 0; i < 12; ++i) {
    const int64_t hd = 2 * rand_int(2, 80);
    const int n_rot = static_cast<int>(rand_int(0, 1) ? hd : 2 * rand_int(1, hd / 2));
    const double base = std::array{1e4, 5e5, 1e6}[static_cast<size_t>(rand_int(0, 2))];
    check_case({Kind::LINEAR, hd, n_rot, random_mode(), base, std::exp(std::log(16.0) * randu(1, 0, 1)[0]), 0}, i % 2);
  }
}

TEST(OpRopeScaling, YarnMatchesTransformers) {
  // The fixture's settings (Qwen2.5's YaRN: factor 4, base 1e6, original 512) first, then random.
  check_case({Kind::YARN, 64, 64, ops::RopeMode::NEOX, 1e6, 4, 512}, true);
  check_case({Kind::YARN, 128, 128, ops::RopeMode::NEOX, 1e6, 4, 32768}, false);
  for (int i = 0; i < 24; ++i) {
    const int64_t hd = 2 * rand_int(2, 80);
    const int n_rot = static_cast<int>(rand_int(0, 1) ? hd : 2 * rand_int(1, hd / 2));
    Case c{Kind::YARN, hd, n_rot, random_mode(), std::array{1e4, 5e5, 1e6}[static_cast<size_t>(rand_int(0, 2))],
           std::exp(std::log(40.0) * randu(1, 0, 1)[0]), static_cast<int>(rand_int(64, 65536))};
    if (i % 3 == 1) {
      c.beta_fast = randu(1, 8, 64)[0];
      c.beta_slow = randu(1, 0.25, 4)[0];
    }
    if (i % 4 == 2) c.ext_factor = randu(1, 0.1, 1)[0];  // ggml's partial mix
    if (i % 5 == 3) c.attention_factor = randu(1, 0.5, 2)[0];
    check_case(c, i % 2);
  }
}

TEST(OpRopeScaling, Llama3FrequencyFactorsMatchTransformers) {
  // Llama 3.1's settings (factor 8, low 1, high 4, original 8192, base 5e5), llama-s's (original
  // 256), then random.
  check_case({Kind::LLAMA3, 128, 128, ops::RopeMode::NORMAL, 5e5, 8, 8192}, true);
  check_case({Kind::LLAMA3, 64, 64, ops::RopeMode::NORMAL, 5e5, 8, 256}, false);
  for (int i = 0; i < 12; ++i) {
    const int64_t hd = 2 * rand_int(2, 80);
    Case c{Kind::LLAMA3, hd, static_cast<int>(hd), random_mode(), std::array{1e4, 5e5}[static_cast<size_t>(rand_int(0, 1))],
           randu(1, 2, 32)[0], static_cast<int>(rand_int(128, 16384))};
    c.low_freq = randu(1, 0.5, 2)[0];
    c.high_freq = c.low_freq + randu(1, 1, 8)[0];
    check_case(c, i % 2);
  }
}

TEST(OpRopeScaling, ParamsRoundTripThroughOpParams) {
  ops::RopeParams p{40, ops::RopeMode::NORMAL, 5e5f, 0.125f, 0.75f, 1.2f, 24.0f, 1.5f, 8192};
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {64, 2, 3});
  Tensor* t = ops::rope(ctx, x, ctx.new_tensor(DType::I32, {3}), p, ctx.new_tensor(DType::F32, {20}));
  const ops::RopeParams q = ops::rope_params_of(*t);
  EXPECT_EQ(q.n_rot, 40);
  EXPECT_EQ(q.mode, ops::RopeMode::NORMAL);
  EXPECT_EQ(q.freq_base, 5e5f);
  EXPECT_EQ(q.freq_scale, 0.125f);
  EXPECT_EQ(q.ext_factor, 0.75f);
  EXPECT_EQ(q.attn_factor, 1.2f);
  EXPECT_EQ(q.beta_fast, 24.0f);
  EXPECT_EQ(q.beta_slow, 1.5f);
  EXPECT_EQ(q.n_ctx_orig, 8192);
  EXPECT_DOUBLE_EQ(ops::yarn_mscale(4.0), 0.1 * std::log(4.0) + 1.0);
  EXPECT_EQ(ops::yarn_mscale(0.5), 1.0);
}

TEST(OpRopeScaling, BadParametersAreRejected) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {64, 2, 3});
  Tensor* pos = ctx.new_tensor(DType::I32, {3});
  ops::RopeParams yarn;
  yarn.ext_factor = 1.0f;  // YaRN without an original context
  EXPECT_THROW(ops::rope(ctx, x, pos, yarn), OpError);
  ops::RopeParams scale;
  scale.freq_scale = 0.0f;
  EXPECT_THROW(ops::rope(ctx, x, pos, scale), OpError);
  ops::RopeParams plain;
  EXPECT_THROW(ops::rope(ctx, x, pos, plain, ctx.new_tensor(DType::F32, {31})), OpError);  // n_rot/2 = 32
  EXPECT_THROW(ops::rope(ctx, x, pos, plain, ctx.new_tensor(DType::F16, {32})), OpError);
  EXPECT_NO_THROW(ops::rope(ctx, x, pos, plain, ctx.new_tensor(DType::F32, {32})));
}

}  // namespace
}  // namespace minfer::test
