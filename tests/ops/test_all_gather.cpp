// ALL_GATHER over a group of CPU backends, one thread per rank (HostCollective): every rank gets
// the ranks' tensors side by side along dim 0 in rank order, bit for bit, also from strided
// sources and interleaved with all-reduces; a node whose rank count is not its group's, and
// ranks that hand in different element counts, fail on every rank instead of hanging.
#include <fmt/format.h>
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

// Rank r's x [n0, n1, n2] (contiguous values in[r]) gathered: element (i0 + r * n0, i1, i2).
std::vector<float> gathered(const std::vector<std::vector<float>>& in, int64_t n0, int64_t rows) {
  const auto n_ranks = static_cast<int64_t>(in.size());
  std::vector<float> out(static_cast<size_t>(n_ranks * n0 * rows));
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t r = 0; r < n_ranks; ++r)
      for (int64_t i = 0; i < n0; ++i)
        out[static_cast<size_t>((row * n_ranks + r) * n0 + i)] = in[static_cast<size_t>(r)][static_cast<size_t>(row * n0 + i)];
  return out;
}

void expect_bits(const std::vector<std::vector<float>>& out, const std::vector<float>& expect, const std::string& what) {
  for (size_t r = 0; r < out.size(); ++r) {
    ASSERT_EQ(out[r].size(), expect.size()) << what << " rank " << r;
    EXPECT_EQ(std::memcmp(out[r].data(), expect.data(), expect.size() * 4), 0) << what << " rank " << r << " (seed " << seed() << ")";
  }
}

TEST(AllGather, EveryRankGetsTheRanksAlongDim0InRankOrder) {
  for (int n_ranks : {1, 2, 3, 4}) {
    const int64_t n0 = 37, n1 = 3, n2 = 2;
    const auto in = rank_inputs(n_ranks, static_cast<size_t>(n0 * n1 * n2));
    const auto out = run_ranks(
        n_ranks, [&](Context& c) { return ops::all_gather(c, c.new_tensor(DType::F32, {n0, n1, n2}), n_ranks); },
        [&](int r, Tensor& leaf) { std::memcpy(leaf.data, in[static_cast<size_t>(r)].data(), leaf.nbytes()); });
    expect_bits(out, gathered(in, n0, n1 * n2), fmt::format("{} ranks", n_ranks));
  }
}

// The source a transposed view: the kernel walks its strides.
TEST(AllGather, StridedSource) {
  const int n_ranks = 2;
  const int64_t n0 = 5, n1 = 4;
  const auto in = rank_inputs(n_ranks, static_cast<size_t>(n0 * n1));  // rank r's leaf [n1, n0]
  const auto out = run_ranks(
      n_ranks, [&](Context& c) { return ops::all_gather(c, transpose(c, c.new_tensor(DType::F32, {n1, n0})), n_ranks); },
      [&](int r, Tensor& leaf) { std::memcpy(leaf.data, in[static_cast<size_t>(r)].data(), leaf.nbytes()); });
  std::vector<std::vector<float>> logical(n_ranks, std::vector<float>(static_cast<size_t>(n0 * n1)));
  for (int r = 0; r < n_ranks; ++r)
    for (int64_t i1 = 0; i1 < n1; ++i1)
      for (int64_t i0 = 0; i0 < n0; ++i0)  // element (i0, i1) of the transpose is the leaf's (i1, i0)
        logical[static_cast<size_t>(r)][static_cast<size_t>(i1 * n0 + i0)] = in[static_cast<size_t>(r)][static_cast<size_t>(i0 * n1 + i1)];
  expect_bits(out, gathered(logical, n0, n1), "transposed source");
}

// An all-reduce, then an all-gather of its result times a rank's own input: the calls pair up
// in order across the two collectives.
TEST(AllGather, PairsUpInOrderWithAllReduces) {
  const int n_ranks = 3;
  const int64_t n = 8;
  const auto a = rank_inputs(n_ranks, static_cast<size_t>(n));
  const auto b = rank_inputs(n_ranks, static_cast<size_t>(n));
  const auto out = run_ranks(
      n_ranks,
      [&](Context& c) {
        Tensor* s = ops::all_reduce(c, c.new_tensor(DType::F32, {n}));
        Tensor* x = c.new_tensor(DType::F32, {n});
        x->name = "b";
        return ops::all_gather(c, ops::mul(c, s, x), n_ranks);
      },
      [&](int r, Tensor& leaf) {
        const auto& src = leaf.name == "b" ? b[static_cast<size_t>(r)] : a[static_cast<size_t>(r)];
        std::memcpy(leaf.data, src.data(), leaf.nbytes());
      });
  std::vector<float> s = a[0];
  for (int r = 1; r < n_ranks; ++r)
    for (size_t i = 0; i < s.size(); ++i) s[i] += a[static_cast<size_t>(r)][i];
  std::vector<std::vector<float>> prod(n_ranks, std::vector<float>(static_cast<size_t>(n)));
  for (int r = 0; r < n_ranks; ++r)
    for (size_t i = 0; i < s.size(); ++i) prod[static_cast<size_t>(r)][i] = s[i] * b[static_cast<size_t>(r)][i];
  expect_bits(out, gathered(prod, n, 1), "all_reduce then all_gather");
}

TEST(AllGather, ARankCountOtherThanTheGroupsIsRefused) {
  Context c;
  EXPECT_THROW(ops::all_gather(c, c.new_tensor(DType::F32, {4}), 0), OpError);
  EXPECT_THROW(ops::all_gather(c, c.new_tensor(DType::F16, {4}), 1), OpError);
  auto fill = [](int, Tensor& leaf) { std::memset(leaf.data, 0, leaf.nbytes()); };
  try {
    run_ranks(2, [](Context& c) { return ops::all_gather(c, c.new_tensor(DType::F32, {4}), 3); }, fill);
    ADD_FAILURE() << "gathering over 3 ranks in a group of 2 ran";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("group has 2"), std::string::npos) << e.what();
  }
  CpuBackend alone(1);  // in no group: only a gather over one rank
  LeafData data([](Tensor& leaf) { std::memset(leaf.data, 0, leaf.nbytes()); });
  EXPECT_THROW(run_op(alone, [](Context& c) { return ops::all_gather(c, c.new_tensor(DType::F32, {4}), 2); }, data), OpError);
}

TEST(AllGather, MismatchedSizesFailOnEveryRank) {
  const int n_ranks = 2;
  auto group = std::make_shared<HostCollective>(n_ranks);
  std::vector<int> failed(n_ranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> send(static_cast<size_t>(4 + r), 1.0f), recv(2 * send.size());
      try {
        group->all_gather(r, send.data(), send.size(), recv.data());
      } catch (const std::invalid_argument& e) {
        failed[static_cast<size_t>(r)] = std::string(e.what()).find("different element counts") != std::string::npos;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed, std::vector<int>(n_ranks, 1));
  // The group is usable afterwards.
  threads.clear();
  std::vector<std::vector<float>> recv(n_ranks, std::vector<float>(4));
  for (int r = 0; r < n_ranks; ++r)
    threads.emplace_back([&, r] {
      const std::vector<float> send(2, static_cast<float>(r + 1));
      group->all_gather(r, send.data(), 2, recv[static_cast<size_t>(r)].data());
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(recv[0], (std::vector<float>{1, 1, 2, 2}));
  EXPECT_EQ(recv[1], (std::vector<float>{1, 1, 2, 2}));
}

TEST(AllGather, AnAbortedGroupFailsTheWaitingRanks) {
  auto group = std::make_shared<HostCollective>(2);
  std::vector<float> send(3, 1.0f), recv(6);
  std::thread waiter([&] {
    try {
      group->all_gather(0, send.data(), send.size(), recv.data());
      ADD_FAILURE() << "all_gather returned without rank 1";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("all-gather: another rank"), std::string::npos) << e.what();
    }
  });
  group->abort();
  waiter.join();
}

}  // namespace
}  // namespace minfer::test
