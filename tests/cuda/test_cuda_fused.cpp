// The CUDA backend's graph rewrite (ops/cuda/rewrite.cpp) and its fused kernels, against the
// CPU running the same basic ops (the toolkit's blocks, models/layers.h):
// - the attention input block -> QKV: Qwen2 style (q/k/v bias) and Qwen3 style (q_norm/k_norm),
//   adjacent and separate weights, float and quantized weights, every cache dtype, decode (N = 1),
//   verify (7) and prefill (33) sizes with a past, and scaled RoPE (YaRN, frequency factors) at
//   positions up to ~32k; checked through attention over the caches QKV wrote (which reads back
//   every stored K/V row);
// - the SwiGLU MLP -> FFN_SWIGLU, and with a big Q4_K gate|up its SwiGLU epilogue (bit for bit
//   against the basic ops on CUDA);
// - a whole decoder layer: RMS_NORM -> RMS_NORM_Q8_1 feeding QKV / FFN_SWIGLU, and the residual
//   ADDs folded into MUL_MAT_ADD / FFN_SWIGLU at decode sizes;
// - the residual added by MMQ's f16 kernel (big Q4_K / Q6_K weights);
// - a MoE FFN's slot sum and residual -> MOE_SUM, its experts -> FFN_SWIGLU with ids (also bit for
//   bit against the basic ops on CUDA);
// - every pattern on a layer graph without a device (the rewrite alone).
// Each check also asserts which fused ops the rewritten graph holds, so a pattern that stops
// matching fails here instead of silently running the basic ops.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/layer_graph.h"
#include "cuda_test_util.h"
#include "models/layers.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

using FusedCount = std::map<Op, int>;

// Runs `build` on the CPU and on CUDA (named inputs), compares, and returns how many nodes of each
// fused op the CUDA graph ran.
FusedCount compare_fused(const BuildFn& build, const InitFn& init, double tol, const std::string& what) {
  LeafData a(init), b(init);
  auto ref = run_op(cpu(), build, a);
  auto got = run_op(*gpu(), build, b);
  expect_close(got.values, ref.values, tol, "cuda vs cpu: " + what);
  for (const Tensor* n : ref.graph.nodes()) EXPECT_FALSE(op_is_fused(n->op)) << "the CPU rewrote " << op_name(n->op);
  FusedCount c;
  for (const Tensor* n : got.graph.nodes())
    if (op_is_fused(n->op)) ++c[n->op];
  return c;
}

std::string show(const FusedCount& c) {
  std::string s;
  for (const auto& [op, n] : c) s += fmt::format("{} x{} ", op_name(op), n);
  return s.empty() ? "none" : s;
}


struct QkvCase {
  bool adjacent, bias, qk_norm;
  DType wt, cache;
  int64_t T, past;
  int scaling = 0;  // RoPE: 0 plain, 1 YaRN (Qwen2.5's), 2 YaRN with Llama 3 style frequency factors
  int64_t n_embd = 256;  // 4096 / 8192: the decode matmuls split K (the epilogue adds the slices)
};

void check_qkv(const QkvCase& c) {
  // Long positions need a cache that holds them: blocks of 16 cells.
  const int64_t n_embd = c.n_embd, hd = 64, n_head = 4, n_kv = 2;
  const int64_t n_ctx = std::max<int64_t>(96, (c.past + c.T + 15) / 16 * 16);
  // One sequence whose blocks of 16 cells run backwards through the cache.
  const InitFn init = named_init([&](Tensor& leaf) {
    if (leaf.name == "rope_freqs") {
      for (int64_t i = 0; i < leaf.nelements(); ++i)
        static_cast<float*>(leaf.data)[i] = 1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(leaf.nelements());
      return true;
    }
    if (leaf.type != DType::I32) return false;
    auto* out = static_cast<int32_t*>(leaf.data);
    const int64_t nb = n_ctx / 16;
    for (int64_t i = 0; i < leaf.nelements(); ++i) {
      const int64_t p = c.past + i;
      out[i] = leaf.name == "pos"     ? static_cast<int32_t>(p)
               : leaf.name == "cells" ? static_cast<int32_t>((nb - 1 - p / 16) * 16 + p % 16)
               : leaf.name == "seq"   ? 0
                                      : static_cast<int32_t>(nb - 1 - i);  // the table
    }
    return true;
  });
  models::AttentionParams p;
  p.n_head = n_head;
  p.n_head_kv = n_kv;
  p.head_dim = hd;
  p.head_dim_v = hd;
  p.rope.freq_base = 1e6f;
  if (c.scaling) {
    p.rope.freq_scale = 0.25f;
    p.rope.ext_factor = 1.0f;
    p.rope.attn_factor = 1.1386294f;
    p.rope.n_ctx_orig = 512;
  }
  p.norm_eps = 1e-6f;
  auto build = [&](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {n_embd, c.T}, "x");
    models::Attention w;
    if (c.adjacent) {
      Tensor* root = ctx.new_tensor(c.wt, {n_embd, (n_head + 2 * n_kv) * hd}, "wqkv");
      w.wq = slice(ctx, root, 1, 0, n_head * hd);
      w.wk = slice(ctx, root, 1, n_head * hd, n_kv * hd);
      w.wv = slice(ctx, root, 1, (n_head + n_kv) * hd, n_kv * hd);
    } else {
      w.wq = ctx.new_tensor(c.wt, {n_embd, n_head * hd}, "wq");
      w.wk = ctx.new_tensor(c.wt, {n_embd, n_kv * hd}, "wk");
      w.wv = ctx.new_tensor(c.wt, {n_embd, n_kv * hd}, "wv");
    }
    if (c.bias) {
      w.bq = ctx.new_tensor(DType::F32, {n_head * hd}, "bq");
      w.bk = ctx.new_tensor(DType::F32, {n_kv * hd}, "bk");
      w.bv = ctx.new_tensor(DType::F32, {n_kv * hd}, "bv");
    }
    if (c.qk_norm) {
      w.q_norm = ctx.new_tensor(DType::F32, {hd}, "q_norm");
      w.k_norm = ctx.new_tensor(DType::F32, {hd}, "k_norm");
    }
    if (c.scaling == 2) w.rope_freqs = ctx.new_tensor(DType::F32, {hd / 2}, "rope_freqs");
    Tensor* pos = ctx.new_tensor(DType::I32, {c.T}, "pos");
    Tensor* cells = ctx.new_tensor(DType::I32, {c.T}, "cells");
    Tensor* kc = ctx.new_tensor(c.cache, {hd, n_kv, n_ctx}, "k_cache");
    Tensor* vc = ctx.new_tensor(c.cache, {hd, n_kv, n_ctx}, "v_cache");
    const auto pr = w.project(ctx, x, pos, cells, kc, vc, p);
    // Weights of stddev 1/sqrt(n_embd) (named_init) keep q and k O(1): the scores are too, so the
    // softmax is not a near-argmax that would amplify rounding differences.
    return ops::attention(ctx, pr.q, pr.k_store, pr.v_store, pos, ctx.new_tensor(DType::I32, {c.T}, "seq"),
                          ctx.new_tensor(DType::I32, {n_ctx / 16, 1}, "table"), 16, 0.125f);
  };
  // The cache rows before the past are random (never written): attention over them is defined.
  // f16/q8 rounding flips; an f16 cache's attention runs on the tensor cores (q and P in f16).
  // Quantized weights into a q8_0 cache compound two roundings: each side quantizes the
  // activations its own way (~0.5 % on the new K and V rows), which moves the new rows across
  // q8_0 steps (~0.8 % of a block's max) for about a quarter of their elements; nmse is ~1e-4
  // typically with a tail past 5e-4 (6.9e-4 seen on the H100, 2026-12-05). A wrong row, head or
  // position gives nmse ~1.
  const double tol = dtype_is_quantized(c.wt) && c.cache == DType::Q8_0 ? 2e-3
                     : dtype_is_quantized(c.wt) || c.cache == DType::Q8_0 ? 5e-4
                     : c.cache == DType::F16 ? 2e-6
                                             : 1e-8;
  const std::string what =
      fmt::format("qkv adjacent={} bias={} norm={} w={} cache={} T={} past={} rope scaling={} n_embd={}", c.adjacent,
                  c.bias, c.qk_norm, dtype_name(c.wt), dtype_name(c.cache), c.T, c.past, c.scaling, c.n_embd);
  const FusedCount f = compare_fused(build, init, tol, what);
  EXPECT_EQ(f.count(Op::QKV) ? f.at(Op::QKV) : 0, 1) << what << ": fused " << show(f);
}

TEST(CudaFusedQkv, RewriteMatchesTheBasicOps) {
  MINFER_REQUIRE_GPU();
  for (bool adjacent : {true, false})
    for (int style = 0; style < 2; ++style)
      for (int64_t T : {1, 7, 33}) {
        check_qkv({adjacent, style == 0, style == 1, DType::F16, DType::F16, T, T == 1 ? 40 : 5});
        check_qkv({adjacent, style == 0, style == 1, DType::Q4_K, DType::F32, T, 3});
      }
  for (DType cache : {DType::F32, DType::F16, DType::Q8_0})
    for (DType wt : {DType::Q8_0, DType::Q6_K, DType::F32}) check_qkv({true, true, false, wt, cache, 1, 17});
  // Scaled RoPE (YaRN; YaRN with frequency factors) at short and long positions (up to ~32k).
  for (int scaling : {1, 2})
    for (int64_t past : {int64_t{5}, int64_t{32700}})
      for (int64_t T : {1, 33}) check_qkv({true, scaling == 1, scaling == 2, DType::F16, DType::F32, T, past, scaling});
  // K split into slices that the epilogue adds: the int8 MMQ (K = 4096) and the f16 one (K = 8192),
  // one, two (wq|wk and wv) and three matmuls, at MMQ batch sizes; T = 4 stays unsplit (MMVQ).
  for (int64_t n_embd : {4096, 8192})
    for (DType wt : {DType::Q4_K, DType::Q6_K})
      for (int64_t T : {4, 16, 40}) {
        check_qkv({true, true, false, wt, DType::F16, T, 9, 0, n_embd});
        check_qkv({false, false, true, wt, DType::Q8_0, T, 9, 0, n_embd});
      }
}

TEST(CudaFusedFfn, RewriteMatchesTheBasicOps) {
  MINFER_REQUIRE_GPU();
  const int64_t n_embd = 256, n_ff = 512;
  for (bool adjacent : {true, false})
    for (DType wt : {DType::Q4_K, DType::Q8_0, DType::F16})
      for (int64_t T : {1, 3, 8, 9, 33}) {
        const DType wdt = wt == DType::Q4_K ? DType::Q6_K : wt;  // the Q4_K_M mix
        const std::string what = fmt::format("ffn adjacent={} w={} T={}", adjacent, dtype_name(wt), T);
        const FusedCount f = compare_fused(
            [&](Context& ctx) {
              Tensor* x = ctx.new_tensor(DType::F32, {n_embd, T}, "x");
              models::SwiGluFfn ffn;
              if (adjacent) {
                Tensor* gu = ctx.new_tensor(wt, {n_embd, 2 * n_ff}, "w_gate_up");
                ffn.gate = slice(ctx, gu, 1, 0, n_ff);
                ffn.up = slice(ctx, gu, 1, n_ff, n_ff);
              } else {
                ffn.gate = ctx.new_tensor(wt, {n_embd, n_ff}, "w_gate");
                ffn.up = ctx.new_tensor(wt, {n_embd, n_ff}, "w_up");
              }
              ffn.down = ctx.new_tensor(wdt, {n_ff, n_embd}, "w_down");
              return ffn.forward(ctx, x);
            },
            named_init(), dtype_is_quantized(wt) ? 1e-3 : 1e-8, what);
        EXPECT_EQ(f.count(Op::FFN_SWIGLU) ? f.at(Op::FFN_SWIGLU) : 0, 1) << what << ": fused " << show(f);
      }
}

// A big Q4_K gate|up (M = 2 n_ff >= 16384: the f16 MMQ at every row, K not split) takes SwiGLU and
// the down projection's q8_1 quantization into its epilogue (mmq_f16_swiglu): the fused FFN must
// give the bits of the basic ops on the same device (one gate|up matmul, swiglu, down), with and
// without the residual, at one row, MMVQ-range rows, the 16-column tile and past it. The shape
// meets mmq_f16_swiglu_ok at every T here (M = 16384, K = 512, aligned rows); the graph does not
// show which kernel a node ran, so this checks the epilogue's bits wherever it runs, and the ncu
// step of docs/perf/2026-12-06-decode-epilogues.md shows that it runs (no swiglu_q8_1 launch).
TEST(CudaFusedFfn, SwigluEpilogueKeepsTheBasicOpsBits) {
  MINFER_REQUIRE_GPU();
  static CudaBackend unfused(0, CudaOptions{.fusion = false});
  const int64_t n_embd = 512, n_ff = 8192;
  for (DType wdt : {DType::Q6_K, DType::Q4_K})
    for (bool residual : {false, true})
      for (int64_t T : {1, 4, 8, 9, 16, 33}) {
        const std::string what = fmt::format("ffn n_ff={} down={} residual={} T={}", n_ff, dtype_name(wdt), residual, T);
        auto build = [&](Context& ctx) {
          Tensor* x = ctx.new_tensor(DType::F32, {n_embd, T}, "x");
          Tensor* gu = ctx.new_tensor(DType::Q4_K, {n_embd, 2 * n_ff}, "w_gate_up");
          models::SwiGluFfn ffn;
          ffn.gate = slice(ctx, gu, 1, 0, n_ff);
          ffn.up = slice(ctx, gu, 1, n_ff, n_ff);
          ffn.down = ctx.new_tensor(wdt, {n_ff, n_embd}, "w_down");
          Tensor* y = ffn.forward(ctx, x);
          return residual ? models::residual_add(ctx, x, y) : y;
        };
        LeafData a(named_init()), b(named_init());
        const auto fused = run_op(*gpu(), build, a);
        const auto basic = run_op(unfused, build, b);
        int n_ffn = 0;
        for (const Tensor* n : fused.graph.nodes()) n_ffn += n->op == Op::FFN_SWIGLU;
        EXPECT_EQ(n_ffn, 1) << what;
        ASSERT_EQ(fused.values.size(), basic.values.size());
        for (size_t i = 0; i < fused.values.size(); ++i) {
          ASSERT_TRUE(std::isfinite(fused.values[i])) << what << " [" << i << "]";
          ASSERT_EQ(fused.values[i], basic.values[i]) << what << " [" << i << "]: fused vs basic ops";
        }
      }
  // Behind the post-attention norm the epilogue reads the RMS_NORM_Q8_1's planes (their own
  // rounding: against the CPU, within the quantized-FFN bound).
  for (int64_t T : {1, 16}) {
    const std::string what = fmt::format("norm + ffn n_ff={} T={}", n_ff, T);
    const FusedCount f = compare_fused(
        [&](Context& ctx) {
          Tensor* x = ctx.new_tensor(DType::F32, {n_embd, T}, "x");
          Tensor* gu = ctx.new_tensor(DType::Q4_K, {n_embd, 2 * n_ff}, "w_gate_up");
          models::SwiGluFfn ffn;
          ffn.gate = slice(ctx, gu, 1, 0, n_ff);
          ffn.up = slice(ctx, gu, 1, n_ff, n_ff);
          ffn.down = ctx.new_tensor(DType::Q6_K, {n_ff, n_embd}, "w_down");
          const models::RmsNorm norm{ctx.new_tensor(DType::F32, {n_embd}, "ffn_norm"), 1e-6f};
          return models::residual_add(ctx, x, ffn.forward(ctx, norm.forward(ctx, x)));
        },
        named_init(), 1e-3, what);
    EXPECT_EQ(f.count(Op::RMS_NORM_Q8_1) ? f.at(Op::RMS_NORM_Q8_1) : 0, 1) << what << ": fused " << show(f);
    EXPECT_EQ(f.count(Op::FFN_SWIGLU) ? f.at(Op::FFN_SWIGLU) : 0, 1) << what << ": fused " << show(f);
  }
}

// A whole decoder layer (the Qwen2/Qwen3 block) through every rewrite at decode sizes: RMS_NORM ->
// RMS_NORM_Q8_1 feeding QKV / FFN_SWIGLU, the attention output projection + residual as
// MUL_MAT_ADD, the MLP + residual as FFN_SWIGLU with src[4]. A prefill size keeps the f32 paths.
TEST(CudaFusedLayer, DecoderLayerThroughEveryRewrite) {
  MINFER_REQUIRE_GPU();
  const int64_t n_embd = 256, hd = 64, n_head = 4, n_kv = 2, n_ff = 512, n_ctx = 96;
  for (bool qwen3 : {false, true})
    for (int64_t T : {1, 4, 20, 80}) {
      const int64_t past = T == 1 ? 30 : 2;
      // One sequence in consecutive blocks of 16: cells equal positions.
      const InitFn init = named_init([&](Tensor& leaf) {
        if (leaf.type != DType::I32) return false;
        for (int64_t i = 0; i < leaf.nelements(); ++i)
          static_cast<int32_t*>(leaf.data)[i] = leaf.name == "pos" || leaf.name == "cells" ? static_cast<int32_t>(past + i)
                                                : leaf.name == "seq"                          ? 0
                                                                                              : static_cast<int32_t>(i);
        return true;
      });
      auto build = [&](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {n_embd, T}, "x");
        Tensor* pos = ctx.new_tensor(DType::I32, {T}, "pos");
        Tensor* cells = ctx.new_tensor(DType::I32, {T}, "cells");
        Tensor* kc = ctx.new_tensor(DType::F16, {hd, n_kv, n_ctx}, "k_cache");
        Tensor* vc = ctx.new_tensor(DType::F16, {hd, n_kv, n_ctx}, "v_cache");
        Tensor* wqkv = ctx.new_tensor(DType::Q4_K, {n_embd, (n_head + 2 * n_kv) * hd}, "wqkv");
        models::Attention att;
        att.wq = slice(ctx, wqkv, 1, 0, n_head * hd);
        att.wk = slice(ctx, wqkv, 1, n_head * hd, n_kv * hd);
        att.wv = slice(ctx, wqkv, 1, (n_head + n_kv) * hd, n_kv * hd);
        if (qwen3) {
          att.q_norm = ctx.new_tensor(DType::F32, {hd}, "q_norm");
          att.k_norm = ctx.new_tensor(DType::F32, {hd}, "k_norm");
        } else {
          att.bq = ctx.new_tensor(DType::F32, {n_head * hd}, "bq");
          att.bk = ctx.new_tensor(DType::F32, {n_kv * hd}, "bk");
          att.bv = ctx.new_tensor(DType::F32, {n_kv * hd}, "bv");
        }
        att.wo = ctx.new_tensor(DType::Q4_K, {n_embd, n_embd}, "wo");
        models::AttentionParams p;
        p.n_head = n_head;
        p.n_head_kv = n_kv;
        p.head_dim = hd;
        p.head_dim_v = hd;
        p.rope.freq_base = 1e6f;
        p.kq_scale = 0.125f;
        // f16 norm weights in the Qwen3 variant: RMS_NORM_Q8_1 reads either type.
        const DType norm_t = qwen3 ? DType::F16 : DType::F32;
        Tensor* hn = ops::rms_norm(ctx, x, 1e-6f, ctx.new_tensor(norm_t, {n_embd}, "attn_norm"));
        const auto pr = att.project(ctx, hn, pos, cells, kc, vc, p);
        Tensor* a = ops::attention(ctx, pr.q, pr.k_store, pr.v_store, pos, ctx.new_tensor(DType::I32, {T}, "seq"),
                                   ctx.new_tensor(DType::I32, {n_ctx / 16, 1}, "table"), 16, p.kq_scale);
        a = reshape(ctx, a, {hd * n_head, T});
        x = models::residual_add(ctx, x, ops::mul_mat(ctx, att.wo, a));
        hn = ops::rms_norm(ctx, x, 1e-6f, ctx.new_tensor(norm_t, {n_embd}, "ffn_norm"));
        Tensor* gu = ctx.new_tensor(DType::Q4_K, {n_embd, 2 * n_ff}, "w_gate_up");
        models::SwiGluFfn ffn;
        ffn.gate = slice(ctx, gu, 1, 0, n_ff);
        ffn.up = slice(ctx, gu, 1, n_ff, n_ff);
        ffn.down = ctx.new_tensor(DType::Q6_K, {n_ff, n_embd}, "w_down");
        return models::residual_add(ctx, x, ffn.forward(ctx, hn));
      };
      const std::string what = fmt::format("decoder layer qwen3={} T={}", qwen3, T);
      const FusedCount f = compare_fused(build, init, 1e-3, what);
      auto n = [&](Op op) { return f.count(op) ? f.at(op) : 0; };
      EXPECT_EQ(n(Op::QKV), 1) << what << ": fused " << show(f);
      // Decode sizes (q8_1 activations: MMVQ, then MMQ up to kDecodeMaxRows = 64 rows)
      // prequantize and fold both residuals; T = 80 runs cuBLAS: the f32 paths, unfused ADDs.
      const bool vec = T <= 64;
      EXPECT_EQ(n(Op::FFN_SWIGLU), 1) << what << ": fused " << show(f);
      EXPECT_EQ(n(Op::RMS_NORM_Q8_1), vec ? 2 : 0) << what << ": fused " << show(f);
      EXPECT_EQ(n(Op::MUL_MAT_ADD), vec ? 1 : 0) << what << ": fused " << show(f);
    }
}

// The rewrite itself needs no device (cuda::rewrite_graph): a decode-sized Qwen2 layer (q/k/v
// biases) followed by a MoE FFN takes every pattern — also on machines without a GPU, where the
// tests above skip.
TEST(CudaRewrite, DecodeLayerAndMoeTakeEveryPatternWithoutADevice) {
  for (int32_t k : {2, 3, 8}) {  // slot-sum chains of 1, 2 and 7 ADDs
    Context c;
    Graph g({layer_and_moe_graph(c, 4, k)});
    cuda::rewrite_graph(c, g);
    FusedCount f;
    for (const Tensor* n : g.nodes())
      if (op_is_fused(n->op)) ++f[n->op];
    auto n = [&](Op op) { return f.count(op) ? f.at(op) : 0; };
    EXPECT_EQ(n(Op::QKV), 1) << "k=" << k << ": " << show(f);
    // The attention's norm (with q/k/v biases too), the MLP's, and the MoE FFN's (with the f32 rows
    // its router reads).
    EXPECT_EQ(n(Op::RMS_NORM_Q8_1), 3) << "k=" << k << ": " << show(f);
    EXPECT_EQ(n(Op::MUL_MAT_ADD), 1) << "k=" << k << ": " << show(f);
    EXPECT_EQ(n(Op::FFN_SWIGLU), 2) << "k=" << k << ": " << show(f);  // the dense MLP (+ residual) and the experts
    EXPECT_EQ(n(Op::MOE_SUM), 1) << "k=" << k << ": " << show(f);
    int adds = 0, routing = 0;
    for (const Tensor* node : g.nodes()) {
      if (node->op == Op::MOE_SUM) {
        EXPECT_NE(node->src[2], nullptr) << "k=" << k << ": the residual was not folded into MOE_SUM";
        EXPECT_NE(node->src[3], nullptr) << "k=" << k << ": MOE_SUM does not form the routing weights";
      }
      if (node->op == Op::MUL_MAT) {  // the router: reads the f32 rows the experts' norm wrote
        const Tensor* rows = node->src[1];
        EXPECT_TRUE(rows->op == Op::VIEW && rows->src[0]->op == Op::RMS_NORM_Q8_1 && rows->src[0]->param<int32_t>(1) == 1)
            << "k=" << k << ": the router reads " << op_name(rows->op);
      }
      adds += node->op == Op::ADD;
      routing += node->op == Op::SOFT_MAX || node->op == Op::GET_ROWS || node->op == Op::RMS_NORM;
    }
    EXPECT_EQ(adds, 0) << "k=" << k << ": ADDs left beside the fused ops";
    EXPECT_EQ(routing, 0) << "k=" << k << ": a norm, or the routing weights' GET_ROWS / SOFT_MAX, left unfused";
  }
}

// A MoE FFN + residual (the Qwen3-MoE block): the ADD chain over the k slots and the residual ADD
// become one MOE_SUM, and at decode sizes the three expert matmuls with their SwiGLU one
// FFN_SWIGLU with ids — bit for bit what the basic ops give on the same device (same routing,
// same quantization and dot products, same order of sums), and close to the CPU. Decode, MMQ and
// prefill sizes.
TEST(CudaFusedMoe, SlotSumAndResidualAreOneMoeSum) {
  MINFER_REQUIRE_GPU();
  static CudaBackend unfused(0, CudaOptions{.fusion = false});
  const int64_t n_embd = 256, n_ff = 256, n_expert = 16;
  for (int32_t k : {2, 8})
    for (int64_t T : {1, 5, 40, 100}) {
      const std::string what = fmt::format("moe k={} T={}", k, T);
      auto build = [&](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {n_embd, T}, "x");
        models::MoeFfn moe;
        moe.router = ctx.new_tensor(DType::F32, {n_embd, n_expert}, "w_router");
        moe.gate_exps = ctx.new_tensor(DType::Q4_K, {n_embd, n_ff, n_expert}, "w_gate_exps");
        moe.up_exps = ctx.new_tensor(DType::Q4_K, {n_embd, n_ff, n_expert}, "w_up_exps");
        moe.down_exps = ctx.new_tensor(DType::Q6_K, {n_ff, n_embd, n_expert}, "w_down_exps");
        moe.k = k;
        return models::residual_add(ctx, x, moe.forward(ctx, x));
      };
      const FusedCount f = compare_fused(build, named_init(), 1e-3, what);
      EXPECT_EQ(f.count(Op::MOE_SUM) ? f.at(Op::MOE_SUM) : 0, 1) << what << ": fused " << show(f);
      // The experts' gate/up/SwiGLU/down as one FFN_SWIGLU where MUL_MAT_ID runs MMVQ (T <= 8).
      EXPECT_EQ(f.count(Op::FFN_SWIGLU) ? f.at(Op::FFN_SWIGLU) : 0, T <= 8 ? 1 : 0) << what << ": fused " << show(f);
      LeafData a(named_init()), b(named_init());
      const auto fused = run_op(*gpu(), build, a);
      const auto basic = run_op(unfused, build, b);
      ASSERT_EQ(fused.values.size(), basic.values.size());
      for (size_t i = 0; i < fused.values.size(); ++i) {
        ASSERT_TRUE(std::isfinite(fused.values[i])) << what << " [" << i << "]";
        ASSERT_EQ(fused.values[i], basic.values[i]) << what << " [" << i << "]: fused vs basic ops";
      }
      for (const Tensor* n : basic.graph.nodes()) EXPECT_FALSE(op_is_fused(n->op)) << what << ": --no-fusion fused";
    }
}

// The residual on MMQ's f16 kernel (Q4_K / Q6_K weights with K >= 8192 or M >= 16384, k_mmq.cu):
// added by the kernel's epilogue when K is not split (the tall weight), by mmq_reduce when it is
// (K = 8192); as MUL_MAT_ADD and as FFN_SWIGLU's src[4] (the down projection, K = n_ff, from the
// fused FFN's q8_1 planes).
TEST(CudaFusedMatmulAdd, F16MmqAddsTheResidual) {
  MINFER_REQUIRE_GPU();
  struct Shape {
    int64_t K, M;
  };
  for (DType wt : {DType::Q4_K, DType::Q6_K})
    for (const Shape sh : {Shape{8192, 300}, Shape{256, 16400}})
      for (int64_t T : {9, 33}) {
        const std::string what =
            fmt::format("residual + mul_mat w={} K={} M={} T={}", dtype_name(wt), sh.K, sh.M, T);
        const FusedCount f = compare_fused(
            [&](Context& ctx) {
              Tensor* x = ctx.new_tensor(DType::F32, {sh.K, T}, "x");
              Tensor* r = ctx.new_tensor(DType::F32, {sh.M, T}, "r");
              return models::residual_add(ctx, r, ops::mul_mat(ctx, ctx.new_tensor(wt, {sh.K, sh.M}, "w"), x));
            },
            named_init(), 5e-4, what);
        EXPECT_EQ(f.count(Op::MUL_MAT_ADD) ? f.at(Op::MUL_MAT_ADD) : 0, 1) << what << ": fused " << show(f);
      }
  const int64_t n_embd = 256, n_ff = 8192;
  for (int64_t T : {9, 33}) {
    const std::string what = fmt::format("residual + ffn n_ff={} down=q6_K T={}", n_ff, T);
    const FusedCount f = compare_fused(
        [&](Context& ctx) {
          Tensor* x = ctx.new_tensor(DType::F32, {n_embd, T}, "x");
          models::SwiGluFfn ffn;
          ffn.gate = ctx.new_tensor(DType::Q4_K, {n_embd, n_ff}, "w_gate");
          ffn.up = ctx.new_tensor(DType::Q4_K, {n_embd, n_ff}, "w_up");
          ffn.down = ctx.new_tensor(DType::Q6_K, {n_ff, n_embd}, "w_down");
          return models::residual_add(ctx, x, ffn.forward(ctx, x));
        },
        named_init(), 1e-3, what);
    EXPECT_EQ(f.count(Op::FFN_SWIGLU) ? f.at(Op::FFN_SWIGLU) : 0, 1) << what << ": fused " << show(f);
  }
}

}  // namespace
}  // namespace minfer::test
