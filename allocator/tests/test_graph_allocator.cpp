// GraphAllocator: reserve/allocate, the layout cache, and the growth policy.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "layout_checker.h"
#include "minfer/allocator.h"

namespace minfer::alloc {
namespace {

// A toy layer schedule for n_tokens tokens: sizes scale with the batch, like prefill vs decode.
std::vector<BufferRequest> toy_graph(size_t n_tokens, size_t n_embd = 256) {
  const size_t row = n_embd * 4;
  std::vector<BufferRequest> r;
  r.push_back({.size = row * n_tokens, .alignment = 64, .first_use = 0, .last_use = 3});
  r.push_back({.size = row * n_tokens, .alignment = 64, .first_use = 1, .last_use = 2,
               .inplace_of = -1});
  r.push_back({.size = 3 * row * n_tokens, .alignment = 64, .first_use = 2, .last_use = 3});
  r.push_back({.size = row * n_tokens, .alignment = 64, .first_use = 3, .last_use = 4,
               .inplace_of = 0});
  r.push_back({.size = n_tokens * n_tokens * 4, .alignment = 64, .first_use = 4, .last_use = 5});
  r.push_back({.size = row * n_tokens, .alignment = 64, .first_use = 5, .last_use = kForever});
  return r;
}

TEST(GraphAllocator, AllocateReturnsThePlannedLayout) {
  GraphAllocator g;
  const auto graph = toy_graph(7);
  g.reserve(graph);
  const Layout& layout = g.allocate(graph);
  EXPECT_EQ(layout, plan_layout(graph));
  EXPECT_EQ(testing::check_layout(graph, layout), "");
  EXPECT_EQ(g.arena_size(), layout.arena_size);
  EXPECT_TRUE(g.fits());
}

TEST(GraphAllocator, EqualRequestsReuseTheCachedLayout) {
  GraphAllocator g;
  const auto graph = toy_graph(16);
  g.reserve(graph);
  EXPECT_EQ(g.n_plans(), 1u);
  const Layout* first = &g.allocate(graph);
  EXPECT_EQ(g.n_layout_reuses(), 1u);  // reserve() cached the plan
  const auto copy = toy_graph(16);     // equal content, different storage
  const Layout* second = &g.allocate(copy);
  EXPECT_EQ(first, second);
  EXPECT_EQ(g.n_layout_reuses(), 2u);
  EXPECT_EQ(g.n_plans(), 1u);
  EXPECT_FALSE(g.arena_grew());
}

TEST(GraphAllocator, AlternatingShapesBothHitTheCache) {
  GraphAllocator g;
  const auto prefill = toy_graph(128);
  const auto decode = toy_graph(1);
  g.reserve(prefill);
  for (int step = 0; step < 10; ++step) {
    EXPECT_EQ(g.allocate(step % 3 == 0 ? prefill : decode), plan_layout(step % 3 == 0 ? prefill
                                                                                       : decode));
  }
  EXPECT_EQ(g.n_plans(), 2u);  // prefill in reserve(), decode on its first allocate()
  EXPECT_EQ(g.n_layout_reuses(), 9u);
  EXPECT_EQ(g.n_cached(), 2u);
}

TEST(GraphAllocator, LeastRecentlyUsedLayoutIsEvicted) {
  GraphAllocator g(2);
  g.set_allow_grow(true);
  const auto a = toy_graph(1);
  const auto b = toy_graph(2);
  const auto c = toy_graph(3);
  g.allocate(a);
  g.allocate(b);
  g.allocate(a);  // hit; b is now least recently used
  g.allocate(c);  // evicts b
  EXPECT_EQ(g.n_cached(), 2u);
  EXPECT_EQ(g.n_layout_reuses(), 1u);
  g.allocate(a);  // still cached
  EXPECT_EQ(g.n_layout_reuses(), 2u);
  g.allocate(b);  // replanned
  EXPECT_EQ(g.n_plans(), 4u);
}

TEST(GraphAllocator, DifferentRequestsDoNotHit) {
  GraphAllocator g;
  auto graph = toy_graph(8);
  g.reserve(graph);
  graph[3].inplace_of = -1;  // one field changed: must be replanned
  const Layout& layout = g.allocate(graph);
  EXPECT_EQ(layout, plan_layout(graph));
  EXPECT_EQ(g.n_layout_reuses(), 0u);
  EXPECT_EQ(g.n_plans(), 2u);
  EXPECT_NE(hash_requests(graph), hash_requests(toy_graph(8)));
}

TEST(GraphAllocator, SmallerGraphFitsReservedArena) {
  GraphAllocator g;
  g.reserve(toy_graph(512));
  const size_t reserved = g.arena_size();
  EXPECT_TRUE(g.arena_grew());
  const Layout& layout = g.allocate(toy_graph(3));
  EXPECT_LE(layout.arena_size, reserved);
  EXPECT_EQ(g.arena_size(), reserved);
  EXPECT_FALSE(g.arena_grew());
  EXPECT_TRUE(g.fits());
}

TEST(GraphAllocator, BiggerGraphWithoutGrowThrows) {
  GraphAllocator g;
  g.reserve(toy_graph(8));
  const size_t reserved = g.arena_size();
  const auto big = toy_graph(64);
  try {
    g.allocate(big);
    ADD_FAILURE() << "no exception";
  } catch (const std::length_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::to_string(plan_layout(big).arena_size)), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(reserved)), std::string::npos) << what;
  }
  EXPECT_FALSE(g.fits());
  EXPECT_EQ(g.arena_size(), reserved);

  // Reserving the bigger graph afterwards makes it fit, without planning it again.
  g.reserve(big);
  EXPECT_EQ(g.n_plans(), 2u);
  g.allocate(big);
  EXPECT_TRUE(g.fits());
}

TEST(GraphAllocator, AllocateWithoutReserveThrowsUnlessGrowAllowed) {
  GraphAllocator g;
  EXPECT_THROW(g.allocate(toy_graph(4)), std::length_error);
  g.set_allow_grow(true);
  const Layout& layout = g.allocate(toy_graph(4));
  EXPECT_TRUE(g.arena_grew());
  EXPECT_EQ(g.arena_size(), layout.arena_size);
}

TEST(GraphAllocator, GrowPolicyEnlargesArena) {
  GraphAllocator g;
  g.set_allow_grow(true);
  g.reserve(toy_graph(8));
  const size_t reserved = g.arena_size();
  const Layout& layout = g.allocate(toy_graph(64));
  EXPECT_TRUE(g.arena_grew());
  EXPECT_GT(g.arena_size(), reserved);
  EXPECT_EQ(g.arena_size(), layout.arena_size);
  g.allocate(toy_graph(8));
  EXPECT_FALSE(g.arena_grew());
  EXPECT_EQ(g.arena_size(), layout.arena_size);  // never shrinks
}

TEST(GraphAllocator, ClearDropsEverything) {
  GraphAllocator g;
  g.reserve(toy_graph(8));
  g.allocate(toy_graph(8));
  g.clear();
  EXPECT_EQ(g.arena_size(), 0u);
  EXPECT_EQ(g.n_cached(), 0u);
  EXPECT_EQ(g.n_layout_reuses(), 0u);
  EXPECT_EQ(g.n_plans(), 0u);
}

TEST(GraphAllocator, RejectsZeroCacheCapacity) {
  EXPECT_THROW(GraphAllocator(0), std::invalid_argument);
}

TEST(GraphAllocator, InvalidRequestsPropagate) {
  GraphAllocator g;
  std::vector<BufferRequest> bad = toy_graph(2);
  bad[1].alignment = 24;
  EXPECT_THROW(g.reserve(bad), std::invalid_argument);
  EXPECT_THROW(g.allocate(bad), std::invalid_argument);
  EXPECT_EQ(g.n_cached(), 0u);
}

TEST(GraphAllocator, RandomWorkloadMatchesPlanLayout) {
  // Random graphs drawn from a small pool: every allocate() equals a fresh plan, whether cached.
  std::mt19937_64 rng(0x9a11);
  std::vector<std::vector<BufferRequest>> pool;
  for (size_t n_tokens : {1, 2, 5, 17, 64}) pool.push_back(toy_graph(n_tokens, 64 + rng() % 512));
  GraphAllocator g(3);
  for (const auto& graph : pool) g.reserve(graph);
  for (int step = 0; step < 100; ++step) {
    const auto& graph = pool[rng() % pool.size()];
    const Layout& layout = g.allocate(graph);
    ASSERT_EQ(layout, plan_layout(graph));
    ASSERT_LE(layout.arena_size, g.arena_size());
  }
  EXPECT_GT(g.n_layout_reuses(), 0u);
  EXPECT_EQ(g.n_layout_reuses() + g.n_plans(), 100u + pool.size());
}

}  // namespace
}  // namespace minfer::alloc
