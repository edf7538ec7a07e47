// kv_store and attention (naive and blocked) against a double loop: GQA ratios 1, 2, 7, pasts,
// every cache dtype, and the f16-overflow case.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_harness.h"
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

std::vector<double> attention_ref(const Nd& Q, const Nd& K, const Nd& V, const std::vector<int32_t>& pos, double scale) {
  const int64_t d = Q.ne[0], n_head = Q.ne[1], T = Q.ne[2], n_head_kv = K.ne[1], dv = V.ne[0];
  std::vector<double> out;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t hk = h / (n_head / n_head_kv);
      const int64_t vis = pos[static_cast<size_t>(t)] + 1;
      std::vector<double> s(static_cast<size_t>(vis));
      double mx = -1e300;
      for (int64_t j = 0; j < vis; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < d; ++i) acc += Q.at(i, h, t) * K.at(i, hk, j);
        s[static_cast<size_t>(j)] = scale * acc;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - mx));
      for (int64_t i = 0; i < dv; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < vis; ++j) acc += s[static_cast<size_t>(j)] / sum * V.at(i, hk, j);
        out.push_back(acc);
      }
    }
  return out;
}

struct AttnCase {
  int64_t d, n_head, n_head_kv, T, n_kv, past;
  DType kv_type;
  ops::AttentionImpl impl;
};

void check_attention(const AttnCase& c) {
  Tensor *q = nullptr, *k = nullptr, *v = nullptr, *pos = nullptr;
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32)
      for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(c.past + i);
    else fill_random(leaf);
  });
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  auto r = run_op(cpu(), [&](Context& ctx) {
    Tensor* qbase = ctx.new_tensor(DType::F32, {c.d * (c.n_head + 1), c.T});
    q = view(ctx, qbase, {c.d, c.n_head, c.T}, {static_cast<size_t>(c.d) * 4, qbase->nb[1]}, 0);
    k = ctx.new_tensor(c.kv_type, {c.d, c.n_head_kv, c.n_kv});
    v = ctx.new_tensor(c.kv_type, {c.d, c.n_head_kv, c.n_kv});
    pos = ctx.new_tensor(DType::I32, {c.T});
    return ops::attention(ctx, q, k, v, pos, scale, c.impl);
  }, data);
  expect_close(r.values, attention_ref(Nd(*q), Nd(*k), Nd(*v), ints(*pos), scale), 1e-10,
               fmt::format("attention d={} heads {}/{} T={} past={} kv {} impl {}", c.d, c.n_head, c.n_head_kv, c.T,
                           c.past, dtype_name(c.kv_type), static_cast<int>(c.impl)));
}

class OpAttentionKv : public ::testing::TestWithParam<DType> {};

TEST_P(OpAttentionKv, GqaRatiosPastsNaiveAndBlocked) {
  const DType kv = GetParam();
  for (auto impl : {ops::AttentionImpl::NAIVE, ops::AttentionImpl::BLOCKED})
    for (int64_t ratio : {1, 2, 7}) {
        check_attention({64, 2 * ratio, 2, 7, 40, 0, kv, impl});     // prefill
        check_attention({64, 2 * ratio, 2, 1, 200, 133, kv, impl});  // decode at depth (several KV blocks)
        check_attention({32, ratio, 1, 33, 100, 50, kv, impl});      // verify-like batch with a past
      }
}

INSTANTIATE_TEST_SUITE_P(KvDtype, OpAttentionKv, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(OpAttention, ScoresDoNotOverflowF16) {
  // Two 128-dim vectors of 24.0 have a dot of 73,728, over f16's 65,504.
  for (DType kv : {DType::F32, DType::F16})
    for (auto impl : {ops::AttentionImpl::NAIVE, ops::AttentionImpl::BLOCKED}) {
      LeafData data([&](Tensor& leaf) {
        if (leaf.type == DType::I32) {
          static_cast<int32_t*>(leaf.data)[0] = 1;
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
        return ops::attention(c, q, k, v, c.new_tensor(DType::I32, {1}), 1.0f, impl);
      }, data);
      // Equal scores: the output is the mean of the two V rows: (24 - 1) / 2.
      for (float x : r.values) {
        ASSERT_TRUE(std::isfinite(x));
        EXPECT_NEAR(x, 11.5f, 1e-4);
      }
    }
}

TEST(OpKvStore, WritesRowsAtPositionsEveryCacheDtype) {
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

TEST(OpKvStore, PositionPastTheCacheIsAnError) {
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
