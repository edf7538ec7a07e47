// rms_norm, soft_max (scale, causal mask) and rope cases: both modes, partial rotation, strided
// heads, long positions, the spec example, the scalings (linear, YaRN, frequency factors) against
// the formula of ops/rope.h and against Transformers' published parameter functions
// (modeling_rope_utils: _compute_linear_scaling_rope_parameters, _compute_yarn_parameters with
// truncate=True, _compute_llama3_parameters; ggml's ext_factor mix and freq_factors). The
// references share no code with ops/rope.h.
#include <cmath>
#include <numbers>

#include "cases.h"

namespace minfer::test {
namespace {

void rms_norm_cases(std::vector<OpCase>& v) {
  for (int64_t n : kSizes)
    for (DType t : {DType::F32, DType::F16})
      for (int w = 0; w < 3; ++w) {  // no weight, f32 weight, f16 weight
        const DType wt = w == 1 ? DType::F32 : DType::F16;
        v.push_back({fmt::format("rms_norm_{}_n{}{}", dn(t), n, w ? "_w_" + dn(wt) : ""), [=] {
          const float eps = 1e-6f;
          CaseRun r;
          r.build = [=](Context& c) {
            Tensor* base = c.new_tensor(t, {n + 3, 5, 2});
            Tensor* x = slice(c, base, 0, 0, n);  // strided rows
            Tensor* weight = w ? c.new_tensor(wt, {n}) : nullptr;
            Built b{ops::rms_norm(c, x, eps, weight), {x}};
            if (weight) b.in.push_back(weight);
            return b;
          };
          r.reference = [=](const Inputs& in) {
            const Nd X(in[0]);
            const std::vector<double> W = w ? Nd(in[1]).v : std::vector<double>(static_cast<size_t>(n), 1.0);
            std::vector<double> e;
            for (int64_t r2 = 0; r2 < 2; ++r2)
              for (int64_t r1 = 0; r1 < 5; ++r1) {
                double ss = 0;
                for (int64_t i = 0; i < n; ++i) ss += X.at(i, r1, r2) * X.at(i, r1, r2);
                const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
                for (int64_t i = 0; i < n; ++i) e.push_back(X.at(i, r1, r2) * inv * W[static_cast<size_t>(i)]);
              }
            return e;
          };
          r.tol = 1e-11;
          r.tol_device = device_tol(1e-10, 1e-11);
          return r;
        }});
      }
}

void soft_max_cases(std::vector<OpCase>& v) {
  for (int64_t n : kSizes)
    for (bool causal : {false, true})
      v.push_back({fmt::format("soft_max_n{}{}", n, causal ? "_causal" : ""), [=] {
        const int64_t rows = 5;
        const float scale = 0.37f;
        CaseRun r;
        r.init = ids_below(n);
        r.build = [=](Context& c) {
          Tensor* x = c.new_tensor(DType::F32, {n, rows, 2});
          Tensor* pos = causal ? c.new_tensor(DType::I32, {rows}) : nullptr;
          Built b{ops::soft_max(c, x, scale, pos), {x}};
          if (pos) b.in.push_back(pos);
          return b;
        };
        r.reference = [=](const Inputs& in) {
          const Nd X(in[0]);
          const auto p = causal ? ints(in[1]) : std::vector<int32_t>();
          std::vector<double> e;
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t row = 0; row < rows; ++row) {
              const int64_t vis = causal ? p[static_cast<size_t>(row)] + 1 : n;
              double mx = -1e300, sum = 0;
              for (int64_t i = 0; i < vis; ++i) mx = std::max(mx, scale * X.at(i, row, h));
              for (int64_t i = 0; i < vis; ++i) sum += std::exp(scale * X.at(i, row, h) - mx);
              for (int64_t i = 0; i < n; ++i) e.push_back(i < vis ? std::exp(scale * X.at(i, row, h) - mx) / sum : 0.0);
            }
          return e;
        };
        r.tol = 1e-11;
        r.tol_device = device_tol(1e-10, 1e-11);
        return r;
      }});
}

// Rotates every head of X [hd, n_head, T] by pos * inv_freq[k], cos/sin scaled by m.
std::vector<double> rotate_ref(const Nd& X, const std::vector<int32_t>& pos, int n_rot, bool neox,
                               const std::vector<double>& inv_freq, double m) {
  std::vector<double> out;
  const int64_t hd = X.ne[0];
  for (int64_t t = 0; t < X.ne[2]; ++t)
    for (int64_t h = 0; h < X.ne[1]; ++h) {
      std::vector<double> x(static_cast<size_t>(hd));
      for (int64_t i = 0; i < hd; ++i) x[static_cast<size_t>(i)] = X.at(i, h, t);
      for (int k = 0; k < n_rot / 2; ++k) {
        const double ang = pos[static_cast<size_t>(t)] * inv_freq[static_cast<size_t>(k)];
        const double c = std::cos(ang) * m, s = std::sin(ang) * m;
        const size_t a = neox ? static_cast<size_t>(k) : 2 * static_cast<size_t>(k);
        const size_t b = neox ? static_cast<size_t>(k + n_rot / 2) : 2 * static_cast<size_t>(k) + 1;
        const double x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
      }
      out.insert(out.end(), x.begin(), x.end());
    }
  return out;
}

// theta_k of ops/rope.h's formula, in double from the op's (f32) parameters.
std::vector<double> formula_inv_freq(const ops::RopeParams& p, const std::vector<double>& ff) {
  const int n_rot = p.n_rot;
  const double base = p.freq_base;
  double low = 0, high = 0;
  if (p.ext_factor != 0) {
    auto corr_dim = [&](double rot) {
      return n_rot * std::log(p.n_ctx_orig / (2 * std::numbers::pi * rot)) / (2 * std::log(base));
    };
    low = std::max(0.0, std::floor(corr_dim(p.beta_fast)));
    high = std::min(static_cast<double>(n_rot - 1), std::ceil(corr_dim(p.beta_slow)));
  }
  std::vector<double> f(static_cast<size_t>(n_rot / 2));
  for (int k = 0; k < n_rot / 2; ++k) {
    const double extrap = std::pow(base, -2.0 * k / n_rot) / (ff.empty() ? 1.0 : ff[static_cast<size_t>(k)]);
    const double interp = static_cast<double>(p.freq_scale) * extrap;
    double theta = interp;
    if (p.ext_factor != 0) {
      const double rk = (1 - std::clamp((k - low) / std::max(0.001, high - low), 0.0, 1.0)) * p.ext_factor;
      theta = interp * (1 - rk) + extrap * rk;
    }
    f[static_cast<size_t>(k)] = theta;
  }
  return f;
}

// x: heads [hd, n_head, T] as a strided view of a fused qkv row (from its second head) or contiguous.
Tensor* rope_input(Context& c, int64_t hd, int64_t n_head, int64_t T, bool strided) {
  if (!strided) return c.new_tensor(DType::F32, {hd, n_head, T});
  Tensor* base = c.new_tensor(DType::F32, {hd * (n_head + 2), T});
  return view(c, base, {hd, n_head, T}, {static_cast<size_t>(hd) * 4, base->nb[1]}, static_cast<size_t>(hd) * 4);
}

// Positions uniform in [0, max_pos], the first 0 and the last max_pos; freq_factors from `ff`.
InitFn rope_init(int32_t max_pos, std::vector<float> ff = {}) {
  return [max_pos, ff](Tensor& leaf) {
    if (leaf.type == DType::I32) {
      auto* q = static_cast<int32_t*>(leaf.data);
      for (int64_t i = 0; i < leaf.nelements(); ++i) q[i] = static_cast<int32_t>(rand_int(0, max_pos));
      q[0] = 0;
      q[leaf.nelements() - 1] = max_pos;
    } else if (leaf.name == "freq_factors") {
      std::copy(ff.begin(), ff.end(), static_cast<float*>(leaf.data));
    } else {
      fill_random(leaf);
    }
  };
}

// A rope case over the formula reference: p (n_rot resolved), optional freq_factors.
CaseRun formula_rope(const ops::RopeParams& p, int64_t hd, bool strided, std::vector<float> ff, double tol,
                     double vs_cpu) {
  CaseRun r;
  const int64_t n_head = 3, T = 33;
  r.init = rope_init(32767, ff);
  r.build = [=](Context& c) {
    Tensor* x = rope_input(c, hd, n_head, T, strided);
    Tensor* pos = c.new_tensor(DType::I32, {T});
    Tensor* f = ff.empty() ? nullptr : c.new_tensor(DType::F32, {p.n_rot / 2}, "freq_factors");
    Built b{ops::rope(c, x, pos, p, f), {x, pos}};
    if (f) b.in.push_back(f);
    return b;
  };
  r.reference = [=](const Inputs& in) {
    std::vector<double> factors;
    if (in.size() > 2) factors = Nd(in[2]).v;
    return rotate_ref(Nd(in[0]), ints(in[1]), p.n_rot, p.mode == ops::RopeMode::NEOX, formula_inv_freq(p, factors),
                      p.attn_factor);
  };
  // Angles in double, cos/sin rounded to f32 once: ~1e-7 relative per element.
  r.tol = tol;
  r.tol_device = device_tol(vs_cpu, tol);
  return r;
}

const char* mode_name(ops::RopeMode mode) { return mode == ops::RopeMode::NEOX ? "neox" : "normal"; }

void rope_cases(std::vector<OpCase>& v) {
  // Both modes, head dims, partial rotation, strided heads, positions up to 32767.
  for (auto mode : {ops::RopeMode::NEOX, ops::RopeMode::NORMAL})
    for (int64_t hd : {4, 64, 128})
      for (bool partial : {false, true})
        v.push_back({fmt::format("rope_{}_hd{}{}", mode_name(mode), hd,
                                 partial ? "_partial" : ""),
                     [=] {
                       ops::RopeParams p;
                       p.mode = mode;
                       p.n_rot = static_cast<int32_t>(partial ? hd / 2 : hd);
                       p.freq_base = 1e6f;
                       return formula_rope(p, hd, true, {}, 1e-12, 1e-11);
                     }});
  // The spec example: head_dim 4, freq_base 1e4, position 1, x = [1, 2, 3, 4] (values from the
  // formula worked by hand, 4 decimals).
  for (auto mode : {ops::RopeMode::NEOX, ops::RopeMode::NORMAL})
    v.push_back({fmt::format("rope_spec_example_{}", mode_name(mode)), [=] {
      CaseRun r;
      r.init = [](Tensor& leaf) {
        if (leaf.type == DType::I32) {
          static_cast<int32_t*>(leaf.data)[0] = 1;
        } else {
          const float x[] = {1, 2, 3, 4};
          std::copy(x, x + 4, static_cast<float*>(leaf.data));
        }
      };
      ops::RopeParams p;
      p.mode = mode;
      p.freq_base = 1e4f;
      r.build = [=](Context& c) {
        return Built{ops::rope(c, c.new_tensor(DType::F32, {4, 1, 1}), c.new_tensor(DType::I32, {1}), p), {}};
      };
      const std::vector<double> expect = mode == ops::RopeMode::NEOX ? std::vector<double>{-1.9841, 1.9599, 2.4624, 4.0198}
                                                                     : std::vector<double>{-1.1426, 1.9221, 2.9599, 4.0298};
      r.reference = [=](const Inputs&) { return expect; };
      r.tol = 1e-8;
      r.check = [=](const std::vector<float>& got, const Inputs&, const Backend& b) {
        for (size_t i = 0; i < 4 && i < got.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-4) << b.name() << " element " << i;
      };
      return r;
    }});
  // Scalings through the formula: linear, YaRN (default and custom betas, a partial ext_factor,
  // a magnitude), Llama 3-range frequency factors, YaRN with factors.
  struct Scaling {
    const char* name;
    float freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int32_t n_ctx_orig;
    bool factors;
  };
  const Scaling scalings[] = {
      {"linear", 0.25f, 0.0f, 1.0f, 32.0f, 1.0f, 0, false},
      {"yarn", 0.25f, 1.0f, 1.1386294f, 32.0f, 1.0f, 512, false},
      {"yarn_betas", 1.0f / 40.0f, 1.0f, 1.3688879f, 24.0f, 2.0f, 4096, false},
      {"yarn_mix", 0.125f, 0.5f, 0.9f, 32.0f, 1.0f, 8192, false},
      {"freq_factors", 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 0, true},
      {"yarn_freq_factors", 0.5f, 1.0f, 1.0693147f, 32.0f, 1.0f, 2048, true},
  };
  for (const Scaling& sc : scalings)
    for (auto mode : {ops::RopeMode::NEOX, ops::RopeMode::NORMAL})
      for (int64_t hd : {64, 128})
        for (bool partial : {false, true})
          v.push_back({fmt::format("rope_{}_{}_hd{}{}", sc.name, mode_name(mode), hd,
                                   partial ? "_partial" : ""),
                       [=] {
                         ops::RopeParams p;
                         p.mode = mode;
                         p.n_rot = static_cast<int32_t>(partial ? hd / 2 : hd);
                         p.freq_base = 5e5f;
                         p.freq_scale = sc.freq_scale;
                         p.ext_factor = sc.ext_factor;
                         p.attn_factor = sc.attn_factor;
                         p.beta_fast = sc.beta_fast;
                         p.beta_slow = sc.beta_slow;
                         p.n_ctx_orig = sc.n_ctx_orig;
                         std::vector<float> ff;
                         if (sc.factors)  // 1 .. 8, Llama 3's range
                           for (int i = 0; i < p.n_rot / 2; ++i) ff.push_back(1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(p.n_rot / 2));
                         return formula_rope(p, hd, !partial, ff, 1e-12, 1e-11);
                       }});
}

// ---- RoPE scaling against Transformers' parameter functions ----

enum class Kind { LINEAR, YARN, LLAMA3 };

struct HfCase {
  Kind kind;
  int64_t hd;
  int n_rot;
  ops::RopeMode mode;
  double base, factor;
  int n_ctx_orig;
  double beta_fast = 32, beta_slow = 1;
  double ext_factor = 1;               // YaRN only; Transformers has 1, ggml any mix
  double attention_factor = 0;         // YaRN: <= 0 is Transformers' default get_mscale(factor)
  double low_freq = 1, high_freq = 4;  // llama3
};

// Transformers' default inv_freq: 1 / base^(2k/dim), k < dim/2.
std::vector<double> inv_freq_default(int dim, double base) {
  std::vector<double> f(static_cast<size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) f[static_cast<size_t>(i)] = 1.0 / std::pow(base, 2.0 * i / dim);
  return f;
}

// _compute_yarn_parameters (truncate=True), with ggml's ext_factor scaling the extrapolation mix.
std::vector<double> inv_freq_yarn(const HfCase& c, double* attention_factor) {
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
std::vector<double> inv_freq_llama3(const HfCase& c) {
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
std::vector<float> llama3_rope_freqs(const HfCase& c) {
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

std::string describe_case(const HfCase& c) {
  const char* k = c.kind == Kind::LINEAR ? "linear" : c.kind == Kind::YARN ? "yarn" : "llama3";
  return fmt::format("{} hd={} n_rot={} mode={} base={} factor={} orig={} beta={}/{} ext={} attn={} low/high={}/{}", k,
                     c.hd, c.n_rot, static_cast<int>(c.mode), c.base, c.factor, c.n_ctx_orig, c.beta_fast, c.beta_slow,
                     c.ext_factor, c.attention_factor, c.low_freq, c.high_freq);
}

// The op's parameters for the case; `ref` gets the case with the values rounded as the op holds
// them (f32 base, factor, betas, magnitude), so the reference computes the same function.
ops::RopeParams op_params(const HfCase& c, HfCase* ref) {
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

CaseRun hf_rope(const HfCase& c, bool strided) {
  const int64_t n_head = 3, T = 9;
  HfCase rc;
  const ops::RopeParams p = op_params(c, &rc);
  double m = 1;
  std::vector<double> inv_freq;
  std::vector<float> ff;
  if (c.kind == Kind::LINEAR) {
    inv_freq = inv_freq_default(c.n_rot, rc.base);
    for (double& f : inv_freq) f /= rc.factor;
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
  CaseRun r;
  r.what = describe_case(c);
  r.init = rope_init(32767, ff);
  r.build = [=](Context& ctx) {
    Tensor* x = rope_input(ctx, c.hd, n_head, T, strided);
    Tensor* pos = ctx.new_tensor(DType::I32, {T});
    Tensor* f = c.kind == Kind::LLAMA3 ? ctx.new_tensor(DType::F32, {c.n_rot / 2}, "freq_factors") : nullptr;
    return Built{ops::rope(ctx, x, pos, p, f), {x, pos}};
  };
  r.reference = [=](const Inputs& in) {
    return rotate_ref(Nd(in[0]), ints(in[1]), c.n_rot, c.mode == ops::RopeMode::NEOX, inv_freq, m);
  };
  r.tol = 1e-12;
  r.tol_device = device_tol(1e-11, 1e-12);
  return r;
}

ops::RopeMode random_mode() { return rand_int(0, 1) ? ops::RopeMode::NEOX : ops::RopeMode::NORMAL; }

void hf_rope_cases(std::vector<OpCase>& v) {
  for (int i = 0; i < 12; ++i)
    v.push_back({fmt::format("rope_hf_linear_random{}", i), [=] {
      const int64_t hd = 2 * rand_int(2, 80);
      const int n_rot = static_cast<int>(rand_int(0, 1) ? hd : 2 * rand_int(1, hd / 2));
      const double base = std::array{1e4, 5e5, 1e6}[static_cast<size_t>(rand_int(0, 2))];
      return hf_rope({Kind::LINEAR, hd, n_rot, random_mode(), base, std::exp(std::log(16.0) * randu(1, 0, 1)[0]), 0}, i % 2);
    }});
  // Qwen2.5's YaRN as the fixture has it (factor 4, base 1e6, original 512), the 32k original, then random.
  v.push_back({"rope_hf_yarn_qwen25_fixture", [] { return hf_rope({Kind::YARN, 64, 64, ops::RopeMode::NEOX, 1e6, 4, 512}, true); }});
  v.push_back({"rope_hf_yarn_orig32768", [] { return hf_rope({Kind::YARN, 128, 128, ops::RopeMode::NEOX, 1e6, 4, 32768}, false); }});
  for (int i = 0; i < 24; ++i)
    v.push_back({fmt::format("rope_hf_yarn_random{}", i), [=] {
      const int64_t hd = 2 * rand_int(2, 80);
      const int n_rot = static_cast<int>(rand_int(0, 1) ? hd : 2 * rand_int(1, hd / 2));
      HfCase c{Kind::YARN, hd, n_rot, random_mode(), std::array{1e4, 5e5, 1e6}[static_cast<size_t>(rand_int(0, 2))],
               std::exp(std::log(40.0) * randu(1, 0, 1)[0]), static_cast<int>(rand_int(64, 65536))};
      if (i % 3 == 1) {
        c.beta_fast = randu(1, 8, 64)[0];
        c.beta_slow = randu(1, 0.25, 4)[0];
      }
      if (i % 4 == 2) c.ext_factor = randu(1, 0.1, 1)[0];  // ggml's partial mix
      if (i % 5 == 3) c.attention_factor = randu(1, 0.5, 2)[0];
      return hf_rope(c, i % 2);
    }});
  // Llama 3.1's settings (factor 8, low 1, high 4, original 8192, base 5e5), llama-s's (original 256), then random.
  v.push_back({"rope_hf_llama31", [] { return hf_rope({Kind::LLAMA3, 128, 128, ops::RopeMode::NORMAL, 5e5, 8, 8192}, true); }});
  v.push_back({"rope_hf_llama3_fixture", [] { return hf_rope({Kind::LLAMA3, 64, 64, ops::RopeMode::NORMAL, 5e5, 8, 256}, false); }});
  for (int i = 0; i < 12; ++i)
    v.push_back({fmt::format("rope_hf_llama3_random{}", i), [=] {
      const int64_t hd = 2 * rand_int(2, 80);
      HfCase c{Kind::LLAMA3, hd, static_cast<int>(hd), random_mode(), std::array{1e4, 5e5}[static_cast<size_t>(rand_int(0, 1))],
               randu(1, 2, 32)[0], static_cast<int>(rand_int(128, 16384))};
      c.low_freq = randu(1, 0.5, 2)[0];
      c.high_freq = c.low_freq + randu(1, 1, 8)[0];
      return hf_rope(c, i % 2);
    }});
}

}  // namespace

void add_norm_rope_cases(std::vector<OpCase>& v) {
  rms_norm_cases(v);
  soft_max_cases(v);
  rope_cases(v);
  hf_rope_cases(v);
}

}  // namespace minfer::test
