// The toolkit's SwiGLU MLP and attention input block (models/layers.h: basic ops, which the CUDA
// backend's rewrite fuses) on the CPU against double references, with separate weights and with
// adjacent (concatenated) weights.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_harness.h"
#include "models/layers.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/ops.h"
#include "ref.h"

namespace minfer::test {
namespace {

CpuBackend& cpu() {
  static CpuBackend b(2);
  return b;
}

double silu(double x) { return x / (1 + std::exp(-x)); }

// [K, M] row-major matrix-vector in double.
std::vector<double> matvec(const Nd& W, const Nd& X, int64_t t) {
  std::vector<double> y(static_cast<size_t>(W.ne[1]));
  for (int64_t m = 0; m < W.ne[1]; ++m) {
    double s = 0;
    for (int64_t k = 0; k < W.ne[0]; ++k) s += W.at(k, m) * X.at(k, t);
    y[static_cast<size_t>(m)] = s;
  }
  return y;
}

TEST(OpFused, FfnSwigluSeparateAndAdjacentWeights) {
  for (bool adjacent : {false, true}) {
    const int64_t n_embd = 64, n_ff = 96, T = 5;
    Tensor *x = nullptr, *wg = nullptr, *wu = nullptr, *wd = nullptr;
    LeafData data;
    auto r = run_op(cpu(), [&](Context& c) {
      x = c.new_tensor(DType::F32, {n_embd, T});
      if (adjacent) {
        Tensor* gu = c.new_tensor(DType::F32, {n_embd, 2 * n_ff});
        wg = slice(c, gu, 1, 0, n_ff);
        wu = slice(c, gu, 1, n_ff, n_ff);
        EXPECT_NE(adjacent_rows(c, wg, wu), nullptr);
      } else {
        wg = c.new_tensor(DType::F32, {n_embd, n_ff});
        wu = c.new_tensor(DType::F32, {n_embd, n_ff});
        EXPECT_EQ(adjacent_rows(c, wg, wu), nullptr);
      }
      wd = c.new_tensor(DType::F32, {n_ff, n_embd});
      return models::SwiGluFfn{wg, wu, wd}.forward(c, x);
    }, data);
    Nd X(*x), G(*wg), U(*wu), D(*wd);
    std::vector<double> e;
    for (int64_t t = 0; t < T; ++t) {
      auto g = matvec(G, X, t), u = matvec(U, X, t);
      Nd h({n_ff, 1, 1, 1});
      for (int64_t i = 0; i < n_ff; ++i) h.at(i) = silu(g[static_cast<size_t>(i)]) * u[static_cast<size_t>(i)];
      auto y = matvec(D, h, 0);
      e.insert(e.end(), y.begin(), y.end());
    }
    expect_close(r.values, e, 1e-10, adjacent ? "ffn adjacent" : "ffn separate");
    // The CPU runs the basic ops: it rewrites nothing.
    for (Tensor* n : r.graph.nodes()) EXPECT_FALSE(op_is_fused(n->op)) << op_name(n->op);
  }
}

struct QkvCase {
  bool adjacent, bias, qk_norm;
  int64_t past;
  bool scaled = false;  // RoPE with freq_scale, a magnitude and frequency factors (Llama 3 style)
};

void check_qkv(const QkvCase& c) {
  const int64_t n_embd = 48, hd = 32, n_head = 4, n_kv = 2, T = 3, n_ctx = 16;
  const float eps = 1e-6f;
  Tensor *x = nullptr, *wq = nullptr, *wk = nullptr, *wv = nullptr, *bq = nullptr, *bk = nullptr, *bv = nullptr;
  Tensor *qn = nullptr, *kn = nullptr, *pos = nullptr, *cells = nullptr, *kc = nullptr, *vc = nullptr;
  // Positions drive RoPE; cells (scattered, unlike the positions) say where the cache rows go.
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32)
      for (int64_t i = 0; i < leaf.nelements(); ++i)
        static_cast<int32_t*>(leaf.data)[i] =
            leaf.name == "cells" ? static_cast<int32_t>((5 * i + 3 + c.past) % n_ctx) : static_cast<int32_t>(c.past + i);
    else if (leaf.name == "rope_freqs")
      for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<float*>(leaf.data)[i] = 1.0f + 0.5f * static_cast<float>(i);
    else fill_random(leaf);
  });
  models::AttentionParams p;
  p.n_head = n_head;
  p.n_head_kv = n_kv;
  p.head_dim = hd;
  p.head_dim_v = hd;
  p.rope.freq_base = 1e6f;
  if (c.scaled) {
    p.rope.freq_scale = 0.5f;
    p.rope.attn_factor = 1.25f;
  }
  p.norm_eps = eps;
  Tensor* rope_freqs = nullptr;
  auto r = run_op(cpu(), [&](Context& ctx) {
    x = ctx.new_tensor(DType::F32, {n_embd, T});
    if (c.adjacent) {
      Tensor* w = ctx.new_tensor(DType::F32, {n_embd, (n_head + 2 * n_kv) * hd});
      wq = slice(ctx, w, 1, 0, n_head * hd);
      wk = slice(ctx, w, 1, n_head * hd, n_kv * hd);
      wv = slice(ctx, w, 1, (n_head + n_kv) * hd, n_kv * hd);
    } else {
      wq = ctx.new_tensor(DType::F32, {n_embd, n_head * hd});
      wk = ctx.new_tensor(DType::F32, {n_embd, n_kv * hd});
      wv = ctx.new_tensor(DType::F32, {n_embd, n_kv * hd});
    }
    if (c.bias) {
      bq = ctx.new_tensor(DType::F32, {n_head * hd});
      bk = ctx.new_tensor(DType::F32, {n_kv * hd});
      bv = ctx.new_tensor(DType::F32, {n_kv * hd});
    }
    if (c.qk_norm) {
      qn = ctx.new_tensor(DType::F32, {hd});
      kn = ctx.new_tensor(DType::F32, {hd});
    }
    pos = ctx.new_tensor(DType::I32, {T}, "pos");
    cells = ctx.new_tensor(DType::I32, {T}, "cells");
    kc = ctx.new_tensor(DType::F32, {hd, n_kv, n_ctx});
    vc = ctx.new_tensor(DType::F32, {hd, n_kv, n_ctx});
    if (c.scaled) rope_freqs = ctx.new_tensor(DType::F32, {hd / 2}, "rope_freqs");
    models::Attention a;
    a.wq = wq;
    a.wk = wk;
    a.wv = wv;
    a.bq = bq;
    a.bk = bk;
    a.bv = bv;
    a.q_norm = qn;
    a.k_norm = kn;
    a.rope_freqs = rope_freqs;
    const auto pr = a.project(ctx, x, pos, cells, kc, vc, p);
    // The stores become ordering dependencies of q (after ROPE's three sources), so the graph
    // that reads q back runs them too.
    pr.q->src[3] = pr.k_store;
    pr.q->src[4] = pr.v_store;
    return pr.q;
  }, data);

  Nd X(*x), WQ(*wq), WK(*wk), WV(*wv);
  auto positions = ints(*pos);
  auto cell_of = ints(*cells);
  auto head_post = [&](std::vector<double> y, Tensor* b, Tensor* norm, bool rope, int32_t position) {
    const int64_t nh = static_cast<int64_t>(y.size()) / hd;
    if (b)
      for (size_t i = 0; i < y.size(); ++i) y[i] += static_cast<const float*>(b->data)[i];
    for (int64_t h = 0; h < nh; ++h) {
      double* v = y.data() + h * hd;
      if (norm) {
        double ss = 0;
        for (int64_t i = 0; i < hd; ++i) ss += v[i] * v[i];
        const double inv = 1 / std::sqrt(ss / hd + eps);
        for (int64_t i = 0; i < hd; ++i) v[i] = v[i] * inv * static_cast<const float*>(norm->data)[i];
      }
      if (rope)
        for (int64_t k = 0; k < hd / 2; ++k) {
          double theta = std::pow(1e6, -2.0 * k / hd), m = 1;
          if (c.scaled) {
            theta *= 0.5 / (1.0 + 0.5 * k);
            m = 1.25;
          }
          const double ang = position * theta;
          const double a = v[k], bb = v[k + hd / 2];
          v[k] = m * (a * std::cos(ang) - bb * std::sin(ang));
          v[k + hd / 2] = m * (a * std::sin(ang) + bb * std::cos(ang));
        }
    }
    return y;
  };
  std::vector<double> eq;
  Nd KC(*kc), VC(*vc);  // after the run: the stores happened
  double kv_err = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t ps = positions[static_cast<size_t>(t)];
    auto q = head_post(matvec(WQ, X, t), bq, qn, true, ps);
    eq.insert(eq.end(), q.begin(), q.end());
    auto k = head_post(matvec(WK, X, t), bk, kn, true, ps);
    auto v = head_post(matvec(WV, X, t), bv, nullptr, false, ps);
    for (int64_t h = 0; h < n_kv; ++h)
      for (int64_t i = 0; i < hd; ++i) {
        const int32_t cl = cell_of[static_cast<size_t>(t)];
        kv_err = std::max(kv_err, std::abs(KC.at(i, h, cl) - k[static_cast<size_t>(h * hd + i)]));
        kv_err = std::max(kv_err, std::abs(VC.at(i, h, cl) - v[static_cast<size_t>(h * hd + i)]));
      }
  }
  const std::string what =
      fmt::format("qkv adjacent={} bias={} qk_norm={} past={} scaled={}", c.adjacent, c.bias, c.qk_norm, c.past, c.scaled);
  expect_close(r.values, eq, 1e-10, what + " (q)");
  EXPECT_LT(kv_err, 1e-4) << what << " (kv cache)";
}

TEST(OpFused, QkvQwen2AndQwen3Styles) {
  for (bool adjacent : {false, true})
    for (int64_t past : {0, 9}) {
      check_qkv({adjacent, true, false, past});   // Qwen2: q/k/v bias
      check_qkv({adjacent, false, true, past});   // Qwen3: q_norm/k_norm
      check_qkv({adjacent, true, false, past, true});  // scaled RoPE with frequency factors
    }
}

}  // namespace
}  // namespace minfer::test
