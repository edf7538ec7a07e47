// KV_STORE and paged ATTENTION on CUDA against the CPU (GQA 1/2/7, every cache dtype, decode,
// verify and prefill shapes, long pasts, head dims 32..256, scattered and shared blocks, many
// sequences per batch, poisoned unused blocks), and CUDA-graph replay of a decode step whose
// positions change between replays.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "common/paged_attention_case.h"
#include "cuda_test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

void check_paged(const PagedAttnCase& c) {
  const PagedAttnLayout L = make_paged_layout(c, rng());
  LeafData data = paged_leaf_data(c, L);
  PagedAttnOp op;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  // Prefill batches over f16/q8_0 caches with head dims 64/128 run the tensor-core kernel, which
  // rounds q and P to f16.
  const bool tensor_cores = L.pos.size() > 64 && c.kv_type != DType::F32 && c.d == c.dv && (c.d == 64 || c.d == 128);
  compare_cpu_cuda([&](Context& ctx) { return build_paged_attention(ctx, c, L, scale, op); }, data,
                   tensor_cores ? 2e-6 : 1e-9,
                   fmt::format("paged attention d={} heads {}/{} kv {} bs {} seqs {} queries {} (seed {})", c.d,
                               c.n_head, c.n_head_kv, dtype_name(c.kv_type), c.block_size, c.seq_len.size(),
                               L.pos.size(), seed()));
}

// One sequence of past + T tokens whose T newest are the queries, its blocks scattered.
void check_attention(int64_t d, int64_t n_head, int64_t n_head_kv, int64_t T, int64_t past, DType kv) {
  PagedAttnCase c;
  c.d = c.dv = d;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.kv_type = kv;
  c.block_size = static_cast<int32_t>(int64_t{16} << rand_int(0, 2));
  c.seq_len = {static_cast<int32_t>(past + T)};
  c.n_query = {static_cast<int32_t>(T)};
  check_paged(c);
}

class CudaAttention : public ::testing::TestWithParam<DType> {};

TEST_P(CudaAttention, GqaDecodeVerifyPrefill) {
  MINFER_REQUIRE_GPU();
  const DType kv = GetParam();
  for (int64_t ratio : {1, 2, 7}) {
    check_attention(64, 2 * ratio, 2, 7, 0, kv);       // short prefill (split path)
    check_attention(64, 2 * ratio, 2, 1, 133, kv);     // decode at depth
    check_attention(64, 2 * ratio, 2, 1, 4000, kv);    // decode, many splits
    check_attention(32, ratio, 1, 33, 50, kv);         // verify-like batch with a past (tiles)
    check_attention(128, 2 * ratio, 2, 16, 0, kv);     // a verify-sized batch (split path)
    check_attention(128, 2 * ratio, 2, 64, 0, kv);     // the split path's largest batch
    check_attention(128, 2 * ratio, 2, 65, 0, kv);     // just past the split threshold (tiles)
  }
  check_attention(128, 4, 2, 100, 150, kv);   // prefill with a past, several tiles
  check_attention(128, 28, 4, 300, 700, kv);  // Qwen2.5-7B prefill chunk with a past (tensor cores, f16/q8_0)
  check_attention(64, 8, 8, 129, 63, kv);     // head dim 64, no GQA, a partial last query tile
  check_attention(256, 2, 1, 20, 3, kv);      // head dim 256: opt-in shared memory
  check_attention(96, 3, 3, 1, 0, kv);        // head dim 96 (not a power of two), first token
  check_attention(128, 28, 4, 1, 4400, kv);   // Qwen2.5-7B decode at depth (GQA kernel, group 7)
  check_attention(128, 32, 8, 3, 200, kv);    // Qwen3-8B verify-like (GQA kernel, group 4, T 3)
  check_attention(256, 16, 2, 1, 69, kv);     // head dim 256, group 8 (the GQA kernel's limit)
  check_attention(64, 16, 1, 1, 99, kv);      // group 16: the generic split kernel
}

INSTANTIATE_TEST_SUITE_P(KvDtype, CudaAttention, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaAttentionPaged, ManySequencesPerBatchDecodeAndPrefill) {
  MINFER_REQUIRE_GPU();
  for (int trial = 0; trial < 8; ++trial) {
    PagedAttnCase c;
    c.d = c.dv = trial % 2 ? 128 : 64;
    c.n_head = 8;
    c.n_head_kv = 2;
    c.kv_type = trial % 3 == 0 ? DType::Q8_0 : DType::F16;
    c.block_size = static_cast<int32_t>(int64_t{1} << rand_int(3, 7));
    c.interleave = trial >= 6;
    const auto n_seq = static_cast<size_t>(rand_int(2, 16));
    const bool decode = trial % 4 < 2;  // one query each (split kernels) or prompt chunks (tiles, tensor cores)
    for (size_t i = 0; i < n_seq; ++i) {
      c.seq_len.push_back(static_cast<int32_t>(rand_int(1, 1500)));
      c.n_query.push_back(decode ? 1 : static_cast<int32_t>(rand_int(1, std::min<int64_t>(c.seq_len.back(), 80))));
    }
    if (decode) c.n_query.resize(std::min<size_t>(n_seq, 16)), c.seq_len.resize(c.n_query.size());
    c.shared_blocks = trial % 2 ? 2 : 0;
    check_paged(c);
  }
}

TEST(CudaAttentionPaged, LengthsAroundBlockAndTileEdges) {
  MINFER_REQUIRE_GPU();
  for (int32_t len : {1, 31, 32, 33, 63, 64, 65, 4095, 4096, 4097}) {
    PagedAttnCase c;
    c.d = c.dv = 128;
    c.n_head = 8;
    c.n_head_kv = 4;
    c.block_size = 32;
    c.seq_len = {len, len};
    c.n_query = {1, std::min(len, 20)};
    c.shared_blocks = 1;
    check_paged(c);
  }
}

// Long contexts at sampled depths up to 32768 keys: a decode step (split-KV GQA kernel) and a
// 128-query prefill chunk at the end of the past (tensor cores), GQA 1/2/4/7/8, head dims 64/128,
// f16 and q8_0 caches; the chunk's first and last query tiles sit on block and tile edges.
TEST(CudaAttentionPaged, LongContextsAtSampledDepths) {
  MINFER_REQUIRE_GPU();
  struct Heads {
    int64_t n_head, n_head_kv;
  };
  const Heads heads[] = {{2, 2}, {4, 2}, {8, 2}, {7, 1}, {8, 1}};
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t d = trial % 2 ? 128 : 64;
    const Heads h = heads[rand_int(0, 4)];
    const DType kv = trial % 3 == 2 ? DType::Q8_0 : DType::F16;
    const int64_t past = rand_int(1, 32768 - 128);
    check_attention(d, h.n_head, h.n_head_kv, 1, past, kv);
    check_attention(d, h.n_head, h.n_head_kv, 128, past, kv);
  }
  check_attention(128, 8, 1, 1, 32767, DType::F16);   // 32768 keys
  check_attention(128, 8, 1, 128, 32640, DType::Q8_0);
}

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
    Tensor* i = c.new_tensor(DType::I32, {1});
    return ops::attention(c, c.new_tensor(DType::F32, {32, 2, 1}), k, k, i, i, c.new_tensor(DType::I32, {1, 8}), 1, 1.0f);
  }, data2), OpError);  // position 8 of a table row of 1 block of 1
}

TEST(CudaKvStore, WritesRowsAtCellsEveryCacheDtype) {
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

// A decode loop: each step stores the new token's K/V at its cell and attends over the cache
// (one sequence whose blocks run backwards through the cache). The graph is identical every step (positions come from a tensor), so the CUDA backend
// captures it on the second step and replays it after; the outputs must follow the CPU.
class DecodeLoop {
 public:
  DecodeLoop(Backend& b, DType kv, int64_t d, int64_t nh, int64_t nkv, int64_t n_ctx)
      : be_(b), exec_(b), d_(d), nh_(nh), nkv_(nkv), n_ctx_(n_ctx) {
    kc_ = cache_ctx_.new_tensor(kv, {d, nkv, n_ctx});
    vc_ = cache_ctx_.new_tensor(kv, {d, nkv, n_ctx});
    table_ = cache_ctx_.new_tensor(DType::I32, {n_ctx / kBlock, 1});
    buf_ = allocate_tensors(cache_ctx_, b);
    std::vector<int32_t> t(static_cast<size_t>(n_ctx / kBlock));
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(t.size() - 1 - i);
    upload(b, *table_, t.data(), t.size() * 4);
  }
  std::vector<float> step(const std::vector<float>& q, const std::vector<float>& kv, int32_t pos) {
    Context ctx;
    Tensor* tq = ctx.new_tensor(DType::F32, {d_, nh_, 1}, "q");
    Tensor* tx = ctx.new_tensor(DType::F32, {d_, nkv_, 1}, "x");
    Tensor* tp = ctx.new_tensor(DType::I32, {1}, "pos");
    Tensor* tc = ctx.new_tensor(DType::I32, {1}, "cell");
    Tensor* ts = ctx.new_tensor(DType::I32, {1}, "seq");
    for (Tensor* t : {tq, tx, tp, tc, ts}) t->flags |= kTensorInput;
    Tensor* ks = ops::kv_store(ctx, kc_, tx, tc);
    Tensor* vs = ops::kv_store(ctx, vc_, tx, tc);
    Tensor* out = ops::attention(ctx, tq, ks, vs, tp, ts, table_, kBlock, 0.125f);
    Graph g({out});
    exec_.allocate(ctx, g);
    be_.set_tensor(*tq, q.data(), 0, q.size() * 4);
    be_.set_tensor(*tx, kv.data(), 0, kv.size() * 4);
    const int32_t cell = static_cast<int32_t>((n_ctx_ / kBlock - 1 - pos / kBlock) * kBlock + pos % kBlock), zero = 0;
    be_.set_tensor(*tp, &pos, 0, 4);
    be_.set_tensor(*tc, &cell, 0, 4);
    be_.set_tensor(*ts, &zero, 0, 4);
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
  static constexpr int32_t kBlock = 16;
  Tensor *kc_, *vc_, *table_;
  std::unique_ptr<Buffer> buf_;
  int64_t d_, nh_, nkv_, n_ctx_;
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
