// The fused QKV kernel on CUDA against the CPU's decomposition (ops/lower.cpp): Qwen2 style
// (q/k/v bias) and Qwen3 style (q_norm/k_norm), adjacent and separate weights, float and
// quantized weights, every cache dtype, decode (N = 1), verify (7) and prefill (33) sizes with a
// past, and scaled RoPE (YaRN, frequency factors) at positions up to ~32k. Checked twice: the
// rotated queries (the node's output) and attention over the caches the node wrote (which reads
// back every stored K/V row).
#include <gtest/gtest.h>

#include <cmath>

#include "cuda_test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

struct QkvCase {
  bool adjacent, bias, qk_norm;
  DType wt, cache;
  int64_t T, past;
  int scaling = 0;  // RoPE: 0 plain, 1 YaRN (Qwen2.5's), 2 YaRN with Llama 3 style frequency factors
};

void check_qkv(const QkvCase& c, bool through_attention) {
  // Long positions need a cache that holds them: blocks of 16 cells.
  const int64_t n_embd = 256, hd = 64, n_head = 4, n_kv = 2, n_ctx = std::max<int64_t>(96, (c.past + c.T + 15) / 16 * 16);
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
  ops::QkvParams p;
  p.n_head = n_head;
  p.n_head_kv = n_kv;
  p.head_dim = hd;
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
    ops::QkvWeights w;
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
    Tensor* q = ops::qkv(ctx, x, w, pos, cells, kc, vc, p);
    // Weights of stddev 1/sqrt(n_embd) (named_init) keep q and k O(1): the scores are too, so the
    // softmax is not a near-argmax that would amplify rounding differences.
    if (!through_attention) return q;
    return ops::attention(ctx, q, kc, vc, pos, ctx.new_tensor(DType::I32, {c.T}, "seq"),
                          ctx.new_tensor(DType::I32, {n_ctx / 16, 1}, "table"), 16, 0.125f);
  };
  // The cache rows before the past are random (never written): attention over them is defined.
  const double tol = dtype_is_quantized(c.wt) || c.cache == DType::Q8_0 ? 5e-4 : 1e-8;  // f16/q8 rounding flips
  compare_cpu_cuda_named(build, init, tol,
                   fmt::format("qkv adjacent={} bias={} norm={} w={} cache={} T={} past={} rope scaling={} {}",
                               c.adjacent, c.bias, c.qk_norm, dtype_name(c.wt), dtype_name(c.cache), c.T, c.past,
                               c.scaling, through_attention ? "(attention over the caches)" : "(q)"));
}

TEST(CudaFusedQkv, IsSupportedAndMatchesTheDecomposition) {
  {
    Context ctx;
    Tensor* root = ctx.new_tensor(DType::Q4_K, {256, 512});
    ops::QkvWeights w{slice(ctx, root, 1, 0, 256), slice(ctx, root, 1, 256, 128), slice(ctx, root, 1, 384, 128)};
    ops::QkvParams p;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 64;
    Tensor* kc = ctx.new_tensor(DType::F16, {64, 2, 16});
    Tensor* idx = ctx.new_tensor(DType::I32, {1});
    Tensor* q = ops::qkv(ctx, ctx.new_tensor(DType::F32, {256, 1}), w, idx, idx, kc, kc, p);
    EXPECT_TRUE(cuda::op_supported(*q));
  }
  MINFER_REQUIRE_GPU();
  for (bool adjacent : {true, false})
    for (int style = 0; style < 2; ++style)
      for (int64_t T : {1, 7, 33})
        for (bool att : {false, true}) {
          check_qkv({adjacent, style == 0, style == 1, DType::F16, DType::F16, T, T == 1 ? 40 : 5}, att);
          check_qkv({adjacent, style == 0, style == 1, DType::Q4_K, DType::F32, T, 3}, att);
        }
  for (DType cache : {DType::F32, DType::F16, DType::Q8_0})
    for (DType wt : {DType::Q8_0, DType::Q6_K, DType::F32}) check_qkv({true, true, false, wt, cache, 1, 17}, true);
  // Scaled RoPE (YaRN; YaRN with frequency factors) at short and long positions (up to ~32k).
  for (int scaling : {1, 2})
    for (int64_t past : {int64_t{5}, int64_t{32700}})
      for (int64_t T : {1, 33})
        for (bool att : {false, true}) check_qkv({true, scaling == 1, scaling == 2, DType::F16, DType::F32, T, past, scaling}, att);
}

TEST(CudaFusedFfn, IsSupportedAndMatchesTheDecomposition) {
  {
    Context ctx;
    Tensor* gu = ctx.new_tensor(DType::Q4_K, {256, 1024});
    Tensor* f = ops::ffn_swiglu(ctx, ctx.new_tensor(DType::F32, {256, 1}), slice(ctx, gu, 1, 0, 512),
                                slice(ctx, gu, 1, 512, 512), ctx.new_tensor(DType::Q6_K, {512, 256}));
    EXPECT_TRUE(cuda::op_supported(*f));
  }
  MINFER_REQUIRE_GPU();
  const int64_t n_embd = 256, n_ff = 512;
  for (bool adjacent : {true, false})
    for (DType wt : {DType::Q4_K, DType::Q8_0, DType::F16})
      for (int64_t T : {1, 3, 8, 9, 33}) {
        const DType wdt = wt == DType::Q4_K ? DType::Q6_K : wt;  // the Q4_K_M mix
        compare_cpu_cuda_named(
            [&](Context& ctx) {
              Tensor* x = ctx.new_tensor(DType::F32, {n_embd, T}, "x");
              Tensor *wg, *wu;
              if (adjacent) {
                Tensor* gu = ctx.new_tensor(wt, {n_embd, 2 * n_ff}, "w_gate_up");
                wg = slice(ctx, gu, 1, 0, n_ff);
                wu = slice(ctx, gu, 1, n_ff, n_ff);
              } else {
                wg = ctx.new_tensor(wt, {n_embd, n_ff}, "w_gate");
                wu = ctx.new_tensor(wt, {n_embd, n_ff}, "w_up");
              }
              return ops::ffn_swiglu(ctx, x, wg, wu, ctx.new_tensor(wdt, {n_ff, n_embd}, "w_down"));
            },
            named_init(), dtype_is_quantized(wt) ? 1e-3 : 1e-8,
            fmt::format("ffn adjacent={} w={} T={}", adjacent, dtype_name(wt), T));
      }
}

// A whole decoder layer (the Qwen2/Qwen3 block) exercises the dispatch loop's peephole fusions
// at decode sizes: RMS_NORM -> fused QKV / FFN with q8_1 handed over, and MUL_MAT / FFN with the
// residual ADD folded into the epilogue. Larger N runs the unfused paths.
TEST(CudaFusedLayer, DecoderLayerWithPeepholeFusions) {
  MINFER_REQUIRE_GPU();
  const int64_t n_embd = 256, hd = 64, n_head = 4, n_kv = 2, n_ff = 512, n_ctx = 64;
  for (bool qwen3 : {false, true})
    for (int64_t T : {1, 4, 20}) {
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
        ops::QkvWeights w{slice(ctx, wqkv, 1, 0, n_head * hd), slice(ctx, wqkv, 1, n_head * hd, n_kv * hd),
                          slice(ctx, wqkv, 1, (n_head + n_kv) * hd, n_kv * hd)};
        if (qwen3) {
          w.q_norm = ctx.new_tensor(DType::F32, {hd}, "q_norm");
          w.k_norm = ctx.new_tensor(DType::F32, {hd}, "k_norm");
        } else {
          w.bq = ctx.new_tensor(DType::F32, {n_head * hd}, "bq");
          w.bk = ctx.new_tensor(DType::F32, {n_kv * hd}, "bk");
          w.bv = ctx.new_tensor(DType::F32, {n_kv * hd}, "bv");
        }
        ops::QkvParams p;
        p.n_head = n_head;
        p.n_head_kv = n_kv;
        p.head_dim = hd;
        p.rope.freq_base = 1e6f;
        Tensor* hn = ops::rms_norm(ctx, x, 1e-6f, ctx.new_tensor(DType::F32, {n_embd}, "attn_norm"));
        Tensor* q = ops::qkv(ctx, hn, w, pos, cells, kc, vc, p);
        Tensor* a = ops::attention(ctx, q, kc, vc, pos, ctx.new_tensor(DType::I32, {T}, "seq"),
                                   ctx.new_tensor(DType::I32, {n_ctx / 16, 1}, "table"), 16, 0.125f);
        // [hd, n_head, T] -> [hd * n_head, T] through a copy: the harness allocates leaves before
        // the graph, so the build may not take views of nodes.
        a = ops::cpy(ctx, a, ctx.new_tensor(DType::F32, {hd * n_head, T}, "attn_out"));
        x = ops::add(ctx, x, ops::mul_mat(ctx, ctx.new_tensor(DType::Q4_K, {n_embd, n_embd}, "wo"), a));
        hn = ops::rms_norm(ctx, x, 1e-6f, ctx.new_tensor(DType::F32, {n_embd}, "ffn_norm"));
        Tensor* gu = ctx.new_tensor(DType::Q4_K, {n_embd, 2 * n_ff}, "w_gate_up");
        Tensor* f = ops::ffn_swiglu(ctx, hn, slice(ctx, gu, 1, 0, n_ff), slice(ctx, gu, 1, n_ff, n_ff),
                                    ctx.new_tensor(DType::Q6_K, {n_ff, n_embd}, "w_down"));
        return ops::add(ctx, x, f);
      };
      compare_cpu_cuda_named(build, init, 1e-3, fmt::format("decoder layer qwen3={} T={}", qwen3, T));
    }
}

}  // namespace
}  // namespace minfer::test
