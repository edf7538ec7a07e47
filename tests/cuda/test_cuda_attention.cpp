// KV_STORE and ATTENTION on CUDA against the CPU (GQA 1/2/7, every cache dtype, decode, verify
// and prefill shapes, long pasts, head dims 32..256), and CUDA-graph replay of a decode step whose
// positions change between replays.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "cuda_test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

struct AttnCase {
  int64_t d, n_head, n_head_kv, T, n_kv, past;
  DType kv;
};

void check_attention(const AttnCase& c) {
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32)
      for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(c.past + i);
    else fill_random(leaf);
  });
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  compare_cpu_cuda(
      [&](Context& ctx) {
        Tensor* qbase = ctx.new_tensor(DType::F32, {c.d * (c.n_head + 1), c.T});
        Tensor* q = view(ctx, qbase, {c.d, c.n_head, c.T}, {static_cast<size_t>(c.d) * 4, qbase->nb[1]}, 0);
        Tensor* k = ctx.new_tensor(c.kv, {c.d, c.n_head_kv, c.n_kv});
        Tensor* v = ctx.new_tensor(c.kv, {c.d, c.n_head_kv, c.n_kv});
        return ops::attention(ctx, q, k, v, ctx.new_tensor(DType::I32, {c.T}), scale);
      },
      data, 1e-9,
      fmt::format("attention d={} heads {}/{} T={} n_kv={} past={} kv {}", c.d, c.n_head, c.n_head_kv, c.T, c.n_kv,
                  c.past, dtype_name(c.kv)));
}

class CudaAttention : public ::testing::TestWithParam<DType> {};

TEST_P(CudaAttention, GqaDecodeVerifyPrefill) {
  MINFER_REQUIRE_GPU();
  const DType kv = GetParam();
  for (int64_t ratio : {1, 2, 7}) {
    check_attention({64, 2 * ratio, 2, 7, 40, 0, kv});       // short prefill (split path)
    check_attention({64, 2 * ratio, 2, 1, 200, 133, kv});    // decode at depth
    check_attention({64, 2 * ratio, 2, 1, 4097, 4000, kv});  // decode, many splits
    check_attention({32, ratio, 1, 33, 100, 50, kv});        // verify-like batch with a past (tiles)
    check_attention({128, 2 * ratio, 2, 16, 64, 0, kv});     // the split path's largest batch
    check_attention({128, 2 * ratio, 2, 17, 64, 0, kv});     // just past the split threshold
  }
  check_attention({128, 4, 2, 100, 300, 150, kv});  // prefill with a past, several tiles
  check_attention({256, 2, 1, 20, 64, 3, kv});      // head dim 256: opt-in shared memory
  check_attention({96, 3, 3, 1, 7, 0, kv});         // head dim 96 (not a power of two), first token
  check_attention({128, 28, 4, 1, 4500, 4400, kv});  // Qwen2.5-7B decode at depth (GQA kernel, group 7)
  check_attention({128, 32, 8, 3, 300, 200, kv});    // Qwen3-8B verify-like (GQA kernel, group 4, T 3)
  check_attention({256, 16, 2, 1, 70, 69, kv});      // head dim 256, group 8 (the GQA kernel's limit)
  check_attention({64, 16, 1, 1, 100, 99, kv});      // group 16: the generic split kernel
}

INSTANTIATE_TEST_SUITE_P(KvDtype, CudaAttention, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaAttentionErrors, PositionPastTheCacheIsAnOpError) {
  MINFER_REQUIRE_GPU();
  auto pos8 = [] {
    return LeafData([&](Tensor& leaf) {
      if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = 8;
      else fill_random(leaf);
    });
  };
  LeafData data = pos8(), data2 = pos8();
  EXPECT_THROW(run_op(*gpu(), [&](Context& c) {
    return ops::kv_store(c, c.new_tensor(DType::F16, {32, 1, 8}), c.new_tensor(DType::F32, {32, 1, 1}),
                         c.new_tensor(DType::I32, {1}));
  }, data), OpError);
  EXPECT_THROW(run_op(*gpu(), [&](Context& c) {
    Tensor* k = c.new_tensor(DType::F16, {32, 1, 8});
    return ops::attention(c, c.new_tensor(DType::F32, {32, 2, 1}), k, k, c.new_tensor(DType::I32, {1}), 1.0f);
  }, data2), OpError);
}

TEST(CudaKvStore, WritesRowsAtPositionsEveryCacheDtype) {
  MINFER_REQUIRE_GPU();
  for (DType ct : {DType::F32, DType::F16, DType::Q8_0}) {
    LeafData data([&](Tensor& leaf) {
      if (leaf.type == DType::I32) {
        const int32_t p[] = {3, 4, 5, 17, 0};
        std::copy(p, p + 5, static_cast<int32_t*>(leaf.data));
      } else {
        fill_random(leaf);
      }
    });
    compare_cpu_cuda(
        [&](Context& c) {
          Tensor* cache = c.new_tensor(ct, {64, 2, 20});
          Tensor* xbase = c.new_tensor(DType::F32, {64 * 3, 5});
          Tensor* x = view(c, xbase, {64, 2, 5}, {64 * 4, xbase->nb[1]}, 64 * 4);
          return ops::kv_store(c, cache, x, c.new_tensor(DType::I32, {5}));
        },
        data, 0, "kv_store " + std::string(dtype_name(ct)));
  }
}

// A decode loop: each step stores the new token's K/V at its position and attends over the
// cache. The graph is identical every step (positions come from a tensor), so the CUDA backend
// captures it on the second step and replays it after; the outputs must follow the CPU.
class DecodeLoop {
 public:
  DecodeLoop(Backend& b, DType kv, int64_t d, int64_t nh, int64_t nkv, int64_t n_ctx)
      : be_(b), exec_(b), d_(d), nh_(nh), nkv_(nkv) {
    kc_ = cache_ctx_.new_tensor(kv, {d, nkv, n_ctx});
    vc_ = cache_ctx_.new_tensor(kv, {d, nkv, n_ctx});
    buf_ = allocate_tensors(cache_ctx_, b);
  }
  std::vector<float> step(const std::vector<float>& q, const std::vector<float>& kv, int32_t pos) {
    Context ctx;
    Tensor* tq = ctx.new_tensor(DType::F32, {d_, nh_, 1}, "q");
    Tensor* tx = ctx.new_tensor(DType::F32, {d_, nkv_, 1}, "x");
    Tensor* tp = ctx.new_tensor(DType::I32, {1}, "pos");
    for (Tensor* t : {tq, tx, tp}) t->flags |= kTensorInput;
    Tensor* ks = ops::kv_store(ctx, kc_, tx, tp);
    Tensor* vs = ops::kv_store(ctx, vc_, tx, tp);
    Tensor* out = ops::attention(ctx, tq, ks, vs, tp, 0.125f);
    Graph g({out});
    exec_.allocate(ctx, g);
    be_.set_tensor(*tq, q.data(), 0, q.size() * 4);
    be_.set_tensor(*tx, kv.data(), 0, kv.size() * 4);
    be_.set_tensor(*tp, &pos, 0, 4);
    exec_.compute(g);
    std::vector<float> r(static_cast<size_t>(d_ * nh_));
    be_.get_tensor(*out, r.data(), 0, r.size() * 4);
    be_.synchronize();
    return r;
  }

 private:
  Backend& be_;
  Executor exec_;
  Context cache_ctx_;
  Tensor *kc_, *vc_;
  std::unique_ptr<Buffer> buf_;
  int64_t d_, nh_, nkv_;
};

TEST(CudaGraph, DecodeStepsReplayWithNewPositions) {
  MINFER_REQUIRE_GPU();
  const int64_t d = 64, nh = 4, nkv = 2, n_ctx = 64;
  for (bool graphs : {true, false}) {
    gpu()->set_graphs_enabled(graphs);
    const auto before = gpu()->stats();
    DecodeLoop c(cpu(), DType::F16, d, nh, nkv, n_ctx), g(*gpu(), DType::F16, d, nh, nkv, n_ctx);
    for (int32_t pos = 0; pos < 12; ++pos) {
      const auto q = randn(static_cast<size_t>(d * nh)), kv = randn(static_cast<size_t>(d * nkv));
      expect_close(g.step(q, kv, pos), c.step(q, kv, pos), 1e-9, fmt::format("decode step {} graphs={}", pos, graphs));
    }
    const auto after = gpu()->stats();
    if (graphs) {
      EXPECT_EQ(after.graph_captures - before.graph_captures, 1u);
      EXPECT_GE(after.graph_replays - before.graph_replays, 10u);
    } else {
      EXPECT_EQ(after.graph_replays, before.graph_replays);
    }
  }
  gpu()->set_graphs_enabled(true);
}

}  // namespace
}  // namespace minfer::test
