// ALL_REDUCE over a group of CPU backends, one thread per rank (HostCollective): every rank gets
// the float sum in rank order, bit for bit the same on every rank; the ranks' calls pair up in
// order over several all-reduces of one graph; a rank that hands in another element count fails
// on every rank instead of hanging.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "common/test_util.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/ops.h"
#include "rank_runs.h"
#include "tensor/collective.h"

namespace minfer::test {
namespace {

TEST(AllReduce, EveryRankGetsTheRankOrderSum) {
  for (int n_ranks : {1, 2, 3, 4}) {
    const int64_t n0 = 37, n1 = 5;
    const auto in = rank_inputs(n_ranks, static_cast<size_t>(n0 * n1));
    const auto out = run_ranks(
        n_ranks, [&](Context& c) { return ops::all_reduce(c, c.new_tensor(DType::F32, {n0, n1})); },
        [&](int r, Tensor& leaf) { std::memcpy(leaf.data, in[static_cast<size_t>(r)].data(), leaf.nbytes()); });
    std::vector<float> expect = in[0];
    for (int r = 1; r < n_ranks; ++r)
      for (size_t i = 0; i < expect.size(); ++i) expect[i] += in[static_cast<size_t>(r)][i];
    for (int r = 0; r < n_ranks; ++r) {
      ASSERT_EQ(out[static_cast<size_t>(r)].size(), expect.size());
      EXPECT_EQ(std::memcmp(out[static_cast<size_t>(r)].data(), expect.data(), expect.size() * 4), 0)
          << "rank " << r << " of " << n_ranks << " (seed " << seed() << ")";
    }
  }
}

// Two all-reduces in one graph, the second of a strided view of the first's result times a
// rank-dependent input: the calls pair up in order.
TEST(AllReduce, SeveralInOneGraphPairUpInOrder) {
  const int n_ranks = 3;
  const int64_t n = 16;
  const auto a = rank_inputs(n_ranks, static_cast<size_t>(n * 2));
  const auto b = rank_inputs(n_ranks, static_cast<size_t>(n * 2));
  const auto out = run_ranks(
      n_ranks,
      [&](Context& c) {
        Tensor* s = ops::all_reduce(c, c.new_tensor(DType::F32, {n, 2}));
        Tensor* m = ops::mul(c, transpose(c, s), c.new_tensor(DType::F32, {2, n}));
        return ops::all_reduce(c, m);
      },
      [&](int r, Tensor& leaf) {
        const auto& src = leaf.ne[0] == n ? a[static_cast<size_t>(r)] : b[static_cast<size_t>(r)];
        std::memcpy(leaf.data, src.data(), leaf.nbytes());
      });
  std::vector<float> s = a[0];
  for (int r = 1; r < n_ranks; ++r)
    for (size_t i = 0; i < s.size(); ++i) s[i] += a[static_cast<size_t>(r)][i];
  std::vector<float> expect(static_cast<size_t>(2 * n), 0.0f);
  for (int r = 0; r < n_ranks; ++r)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < 2; ++i) {
        // volatile: the rank's product is rounded before the sum, as the graph's MUL rounds it
        // (no fused multiply-add across the two ops).
        const volatile float v = s[static_cast<size_t>(j + n * i)] * b[static_cast<size_t>(r)][static_cast<size_t>(i + 2 * j)];
        float& e = expect[static_cast<size_t>(i + 2 * j)];
        e = r == 0 ? v : e + v;
      }
  for (int r = 0; r < n_ranks; ++r) {
    const auto& o = out[static_cast<size_t>(r)];
    ASSERT_EQ(o.size(), expect.size());
    for (size_t i = 0; i < o.size(); ++i)
      ASSERT_EQ(std::memcmp(&o[i], &expect[i], 4), 0) << "rank " << r << " element " << i << ": " << o[i] << " vs " << expect[i];
  }
}

TEST(AllReduce, MismatchedSizesFailOnEveryRank) {
  const int n_ranks = 2;
  auto group = std::make_shared<HostCollective>(n_ranks);
  std::vector<int> failed(n_ranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> v(static_cast<size_t>(4 + r), 1.0f);
      try {
        group->all_reduce_sum(r, v.data(), v.size());
      } catch (const std::invalid_argument& e) {
        failed[static_cast<size_t>(r)] = std::string(e.what()).find("different element counts") != std::string::npos;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed, std::vector<int>(n_ranks, 1));
  // The group is usable afterwards.
  threads.clear();
  std::vector<std::vector<float>> v(n_ranks, std::vector<float>(3, 2.0f));
  for (int r = 0; r < n_ranks; ++r) threads.emplace_back([&, r] { group->all_reduce_sum(r, v[static_cast<size_t>(r)].data(), 3); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(v[0], std::vector<float>(3, 4.0f));
  EXPECT_EQ(v[1], std::vector<float>(3, 4.0f));
}

TEST(AllReduce, JoinChecksTheRank) {
  CpuBackend cpu(1);
  auto group = std::make_shared<HostCollective>(2);
  EXPECT_THROW(cpu.join(group, 2), std::invalid_argument);
  EXPECT_THROW(cpu.join(group, -1), std::invalid_argument);
  EXPECT_THROW(cpu.join(nullptr, 0), std::invalid_argument);
  EXPECT_THROW(HostCollective(0), std::invalid_argument);
}

}  // namespace
}  // namespace minfer::test
