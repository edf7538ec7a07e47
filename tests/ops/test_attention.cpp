// kv_store and paged attention (naive and blocked) against a double loop over keys gathered through
// the block table: GQA ratios 1, 2, 7, pasts, every cache dtype, scattered and shared blocks, many
// sequences per batch, lengths 1..4097, poisoned unused blocks, and the f16-overflow case.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_harness.h"
#include "common/paged_attention_case.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/ops.h"
#include "ref.h"
#include "tensor/quants.h"

namespace minfer::test {
namespace {

CpuBackend& cpu() {
  static CpuBackend b(2);
  return b;
}

// Paged attention the slow way: gather each sequence's keys and values through the table into a
// contiguous array, then a double-precision softmax per query.
std::vector<double> attention_ref(const PagedAttnCase& c, const PagedAttnLayout& L, const Nd& Q, const Nd& K,
                                  const Nd& V, double scale) {
  const int64_t d = c.d, dv = c.dv, n_head = c.n_head, n_head_kv = c.n_head_kv;
  std::vector<double> out;
  for (size_t t = 0; t < L.pos.size(); ++t) {
    const int32_t s = L.seq[t], vis = L.pos[t] + 1;
    auto cell = [&](int64_t j) {
      return static_cast<int64_t>(L.table[static_cast<size_t>(s) * static_cast<size_t>(L.max_blocks) +
                                          static_cast<size_t>(j / c.block_size)]) * c.block_size + j % c.block_size;
    };
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t hk = h / (n_head / n_head_kv);
      std::vector<double> sc(static_cast<size_t>(vis));
      double mx = -1e300;
      for (int64_t j = 0; j < vis; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < d; ++i) acc += Q.at(i, h, static_cast<int64_t>(t)) * K.at(i, hk, cell(j));
        sc[static_cast<size_t>(j)] = scale * acc;
        mx = std::max(mx, sc[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (auto& x : sc) sum += (x = std::exp(x - mx));
      for (int64_t i = 0; i < dv; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < vis; ++j) acc += sc[static_cast<size_t>(j)] / sum * V.at(i, hk, cell(j));
        out.push_back(acc);
      }
    }
  }
  return out;
}

void check_paged(const PagedAttnCase& c, ops::AttentionImpl impl) {
  const PagedAttnLayout L = make_paged_layout(c, rng());
  LeafData data = paged_leaf_data(c, L);
  PagedAttnOp op;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  auto r = run_op(cpu(), [&](Context& ctx) { return build_paged_attention(ctx, c, L, scale, op, static_cast<int32_t>(impl)); },
                  data);
  expect_close(r.values, attention_ref(c, L, Nd(*op.q), Nd(*op.k), Nd(*op.v), scale), 1e-10,
               fmt::format("paged attention d={} heads {}/{} kv {} bs {} seqs {} queries {} impl {} (seed {})", c.d,
                           c.n_head, c.n_head_kv, dtype_name(c.kv_type), c.block_size, c.seq_len.size(), L.pos.size(),
                           static_cast<int>(impl), seed()));
}

class OpAttentionKv : public ::testing::TestWithParam<DType> {};

TEST_P(OpAttentionKv, GqaRatiosPrefillDecodeAndVerifyOverScatteredBlocks) {
  const DType kv = GetParam();
  for (auto impl : {ops::AttentionImpl::NAIVE, ops::AttentionImpl::BLOCKED})
    for (int64_t ratio : {1, 2, 7}) {
      check_paged({64, 64, 2 * ratio, 2, kv, 16, {7}, {7}}, impl);       // prefill from empty
      check_paged({64, 64, 2 * ratio, 2, kv, 16, {134}, {1}}, impl);     // decode at depth
      check_paged({32, 32, ratio, 1, kv, 8, {83}, {33}}, impl);          // verify-like batch with a past
    }
}

INSTANTIATE_TEST_SUITE_P(KvDtype, OpAttentionKv, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(OpAttentionPaged, ManySequencesOfRandomLengthsInOneBatch) {
  for (int trial = 0; trial < 4; ++trial) {
    PagedAttnCase c;
    c.kv_type = trial % 2 ? DType::F16 : DType::Q8_0;
    c.block_size = static_cast<int32_t>(int64_t{1} << rand_int(0, 6));
    c.interleave = trial >= 2;
    const auto n_seq = static_cast<size_t>(rand_int(2, 9));
    for (size_t s = 0; s < n_seq; ++s) {
      c.seq_len.push_back(static_cast<int32_t>(rand_int(1, 300)));
      c.n_query.push_back(static_cast<int32_t>(rand_int(1, std::min<int64_t>(c.seq_len.back(), 5))));
    }
    check_paged(c, ops::AttentionImpl::BLOCKED);
  }
}

TEST(OpAttentionPaged, ForkedSequencesShareTheirPrefixBlocks) {
  PagedAttnCase c;
  c.block_size = 16;
  c.seq_len = {70, 90, 40};
  c.n_query = {2, 3, 1};
  c.shared_blocks = 2;  // 32 shared tokens
  check_paged(c, ops::AttentionImpl::BLOCKED);
  check_paged(c, ops::AttentionImpl::NAIVE);
}

TEST(OpAttentionPaged, SequenceLengthsFromOneTo32768) {
  const auto sampled = static_cast<int32_t>(rand_int(4098, 32767));
  for (int32_t len : {1, 2, 15, 16, 17, 63, 64, 65, 255, 1000, 4095, 4096, 4097, sampled, 32768}) {
    PagedAttnCase c;
    c.d = c.dv = 64;
    c.n_head = 2;
    c.n_head_kv = 1;
    c.block_size = 32;
    c.seq_len = {len};
    c.n_query = {std::min(len, 2)};
    check_paged(c, ops::AttentionImpl::BLOCKED);
  }
}

TEST(OpAttention, ScoresDoNotOverflowF16) {
  // Two 128-dim vectors of 24.0 have a dot of 73,728, over f16's 65,504.
  for (DType kv : {DType::F32, DType::F16})
    for (auto impl : {ops::AttentionImpl::NAIVE, ops::AttentionImpl::BLOCKED}) {
      LeafData data([&](Tensor& leaf) {
        if (leaf.type == DType::I32) {  // position 1 of sequence 0, whose block 0 holds both rows
          static_cast<int32_t*>(leaf.data)[0] = leaf.name == "pos" ? 1 : 0;
          return;
        }
        std::vector<float> vals(static_cast<size_t>(leaf.nelements()), 24.0f);
        if (leaf.ne[2] == 2 && leaf.ne[0] == 128 && leaf.name == "v")
          for (int64_t i = 0; i < 128; ++i) vals[static_cast<size_t>(128 + i)] = -1.0f;
        for (int64_t r = 0; r < leaf.nrows(); ++r)
          quantize_row(leaf.type, vals.data() + r * 128, static_cast<char*>(leaf.data) + r * leaf.row_size(), 128);
      });
      auto r = run_op(cpu(), [&](Context& c) {
        Tensor* q = c.new_tensor(DType::F32, {128, 1, 1}, "q");
        Tensor* k = c.new_tensor(kv, {128, 1, 2}, "k");
        Tensor* v = c.new_tensor(kv, {128, 1, 2}, "v");
        return ops::attention(c, q, k, v, c.new_tensor(DType::I32, {1}, "pos"), c.new_tensor(DType::I32, {1}, "seq"),
                              c.new_tensor(DType::I32, {1, 1}, "table"), 2, 1.0f, impl);
      }, data);
      // Equal scores: the output is the mean of the two V rows: (24 - 1) / 2.
      for (float x : r.values) {
        ASSERT_TRUE(std::isfinite(x));
        EXPECT_NEAR(x, 11.5f, 1e-4);
      }
    }
}

TEST(OpKvStore, WritesRowsAtCellsEveryCacheDtype) {
  for (DType ct : {DType::F32, DType::F16, DType::Q8_0}) {
    Tensor *cache = nullptr, *x = nullptr, *pos = nullptr;
    const int64_t d = 64, nkv = 2, n_ctx = 20, T = 5;
    LeafData data([&](Tensor& leaf) {
      if (leaf.type == DType::I32) {
        const int32_t p[] = {3, 4, 5, 17, 0};
        std::copy(p, p + 5, static_cast<int32_t*>(leaf.data));
      } else {
        fill_random(leaf);
      }
    });
    Nd before({1, 1, 1, 1});
    auto r = run_op(cpu(), [&](Context& c) {
      cache = c.new_tensor(ct, {d, nkv, n_ctx});
      x = c.new_tensor(DType::F32, {d, nkv, T});
      pos = c.new_tensor(DType::I32, {T});
      return ops::kv_store(c, cache, x, pos);
    }, data);
    // The cache leaf's original bytes are in `data`; rebuild what the cache should hold.
    Tensor orig = *cache;
    std::vector<uint8_t> bytes = data.bytes(0, *cache);
    orig.data = bytes.data();
    Nd C(orig), X(*x);
    auto p = ints(*pos);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < nkv; ++h)
        for (int64_t i = 0; i < d; ++i) C.at(i, h, p[static_cast<size_t>(t)]) = X.at(i, h, t);
    const double tol = ct == DType::F32 ? 0 : ct == DType::F16 ? 1e-6 : 1e-4;
    expect_close(r.values, C.v, tol, "kv_store " + std::string(dtype_name(ct)));
  }
}

TEST(OpKvStore, CellPastTheCacheIsAnError) {
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = 8;
    else fill_random(leaf);
  });
  EXPECT_THROW(run_op(cpu(), [&](Context& c) {
    return ops::kv_store(c, c.new_tensor(DType::F16, {32, 1, 8}), c.new_tensor(DType::F32, {32, 1, 1}),
                         c.new_tensor(DType::I32, {1}));
  }, data), OpError);
}

}  // namespace
}  // namespace minfer::test
