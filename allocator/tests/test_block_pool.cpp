// BlockPool: reference counting, all-or-nothing allocation, the content cache (hits, LRU
// eviction, first writer wins), misuse errors, and a random walk checked against a naive model.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "minfer/block_pool.h"

namespace minfer::alloc {
namespace {

TEST(BlockPool, HandsOutEveryBlockOnceThenRefuses) {
  BlockPool p(4);
  std::set<int32_t> got;
  for (int i = 0; i < 4; ++i) got.insert(p.allocate());
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.n_used(), 4);
  EXPECT_EQ(p.n_free(), 0);
  EXPECT_EQ(p.allocate(), -1);
  EXPECT_EQ(p.n_used(), 4);
}

TEST(BlockPool, SharedBlockIsFreedByItsLastOwner) {
  BlockPool p(2);
  const int32_t b = p.allocate();
  p.retain(b);
  EXPECT_EQ(p.ref_count(b), 2);
  p.release(b);
  EXPECT_EQ(p.n_used(), 1);
  p.release(b);
  EXPECT_EQ(p.n_used(), 0);
  EXPECT_EQ(p.ref_count(b), 0);
  EXPECT_THROW(p.release(b), std::logic_error);
  EXPECT_THROW(p.retain(b), std::logic_error);
  EXPECT_THROW(p.release(7), std::out_of_range);
  EXPECT_THROW(p.ref_count(-1), std::out_of_range);
}

TEST(BlockPool, AllOrNothingAllocation) {
  BlockPool p(5);
  std::vector<int32_t> out;
  EXPECT_TRUE(p.allocate(3, out));
  EXPECT_EQ(out.size(), 3u);
  EXPECT_FALSE(p.allocate(3, out));
  EXPECT_EQ(out.size(), 3u);  // untouched
  EXPECT_EQ(p.n_free(), 2);
  EXPECT_TRUE(p.allocate(2, out));
  EXPECT_THROW(p.allocate(-1, out), std::invalid_argument);
}

TEST(BlockPool, CachedBlockIsFoundWithItsContent) {
  BlockPool p(3);
  const int32_t b = p.allocate();
  EXPECT_TRUE(p.set_hash(b, 42));
  p.release(b);
  EXPECT_EQ(p.n_cached(), 1);
  EXPECT_EQ(p.n_free(), 3);  // cached blocks are free
  EXPECT_EQ(p.find(42), b);
  EXPECT_EQ(p.ref_count(b), 1);
  EXPECT_EQ(p.n_cached(), 0);
  EXPECT_EQ(p.find(42), b);  // a live block is shared too
  EXPECT_EQ(p.ref_count(b), 2);
  EXPECT_EQ(p.find(43), -1);
  EXPECT_EQ(p.stats().cache_hits, 2);
  EXPECT_EQ(p.stats().cache_misses, 1);
}

TEST(BlockPool, PlainFreeBlocksGoBeforeCachedOnesAndEvictionIsLeastRecentlyFreed) {
  BlockPool p(3);
  const int32_t a = p.allocate(), b = p.allocate(), c = p.allocate();
  p.set_hash(a, 1);
  p.set_hash(b, 2);
  p.release(b);  // cached, freed first
  p.release(a);  // cached, freed second
  p.release(c);  // plain free
  EXPECT_EQ(p.allocate(), c);
  EXPECT_EQ(p.allocate(), b);  // the least recently freed cached block is evicted
  EXPECT_EQ(p.stats().evictions, 1);
  EXPECT_EQ(p.find(2), -1);    // its content is gone
  EXPECT_EQ(p.find(1), a);     // the other survived
}

TEST(BlockPool, FirstWriterKeepsAHash) {
  BlockPool p(2);
  const int32_t a = p.allocate(), b = p.allocate();
  EXPECT_TRUE(p.set_hash(a, 9));
  EXPECT_FALSE(p.set_hash(b, 9));
  EXPECT_FALSE(p.has_hash(b));
  EXPECT_TRUE(p.set_hash(a, 9));  // idempotent
  EXPECT_TRUE(p.set_hash(a, 10)); // rehash drops the old one
  EXPECT_EQ(p.find(9), -1);
  p.release(a);
  EXPECT_EQ(p.find(10), a);
  EXPECT_THROW(p.set_hash(3, 1), std::out_of_range);
  p.release(a);
  EXPECT_THROW(p.set_hash(a, 1), std::logic_error);
}

TEST(BlockPool, ClearHashOfACachedBlockMakesItPlainFree) {
  BlockPool p(2);
  const int32_t a = p.allocate();
  p.set_hash(a, 5);
  p.clear_hash(a);
  EXPECT_FALSE(p.has_hash(a));
  EXPECT_EQ(p.find(5), -1);
  p.set_hash(a, 6);
  p.release(a);
  EXPECT_EQ(p.n_cached(), 1);
  p.clear_hash(a);
  EXPECT_EQ(p.n_cached(), 0);
  EXPECT_EQ(p.n_free(), 2);
}

TEST(BlockPool, DropCacheForgetsContent) {
  BlockPool p(2);
  const int32_t a = p.allocate();
  p.set_hash(a, 5);
  p.release(a);
  p.drop_cache();
  EXPECT_EQ(p.n_cached(), 0);
  EXPECT_EQ(p.find(5), -1);
  EXPECT_EQ(p.n_free(), 2);
}

// A random walk of allocate / retain / release / set_hash / find against a naive model that keeps
// reference counts and hashes in maps. Checks that a referenced block is never handed out again,
// that counts match, that find() returns the block registered under the hash, and that at the
// end every block can be freed.
TEST(BlockPool, RandomWalkMatchesANaiveModel) {
  std::mt19937 rng(std::random_device{}());
  const int32_t n = 1 + static_cast<int32_t>(rng() % 64);
  BlockPool p(n);
  std::map<int32_t, int32_t> ref;         // model: referenced blocks
  std::map<uint64_t, int32_t> owner;      // model: hash -> block (referenced or cached)
  std::map<int32_t, uint64_t> hash_of;
  std::vector<int32_t> handles;           // one entry per reference held
  for (int step = 0; step < 20000; ++step) {
    const unsigned what = rng() % 5;
    if (what == 0) {
      const int32_t b = p.allocate();
      if (b < 0) {
        ASSERT_EQ(static_cast<int32_t>(ref.size()), n);
        continue;
      }
      ASSERT_FALSE(ref.contains(b)) << "block " << b << " handed out while referenced";
      if (hash_of.contains(b)) {  // evicted
        owner.erase(hash_of[b]);
        hash_of.erase(b);
      }
      ref[b] = 1;
      handles.push_back(b);
    } else if (what == 1 && !handles.empty()) {
      const int32_t b = handles[rng() % handles.size()];
      p.retain(b);
      ++ref[b];
      handles.push_back(b);
    } else if (what == 2 && !handles.empty()) {
      const size_t i = rng() % handles.size();
      const int32_t b = handles[i];
      handles.erase(handles.begin() + static_cast<std::ptrdiff_t>(i));
      p.release(b);
      if (--ref[b] == 0) ref.erase(b);
    } else if (what == 3 && !handles.empty()) {
      const int32_t b = handles[rng() % handles.size()];
      const uint64_t h = rng() % 32;
      const bool ok = p.set_hash(b, h);
      if (hash_of.contains(b) && hash_of[b] == h) {
        ASSERT_TRUE(ok);
        continue;
      }
      if (hash_of.contains(b)) {
        owner.erase(hash_of[b]);
        hash_of.erase(b);
      }
      ASSERT_EQ(ok, !owner.contains(h));
      if (ok) {
        owner[h] = b;
        hash_of[b] = h;
      }
    } else if (what == 4) {
      const uint64_t h = rng() % 32;
      const int32_t b = p.find(h);
      if (!owner.contains(h)) {
        ASSERT_EQ(b, -1);
        continue;
      }
      ASSERT_EQ(b, owner[h]);
      ++ref[b];
      handles.push_back(b);
    }
    ASSERT_EQ(p.n_used(), static_cast<int32_t>(ref.size()));
    for (const auto& [b, r] : ref) ASSERT_EQ(p.ref_count(b), r);
  }
  for (int32_t b : handles) p.release(b);
  EXPECT_EQ(p.n_used(), 0);
  EXPECT_EQ(p.n_free(), n);
  std::set<int32_t> all;
  for (int32_t i = 0; i < n; ++i) all.insert(p.allocate());
  EXPECT_EQ(static_cast<int32_t>(all.size()), n);
}

}  // namespace
}  // namespace minfer::alloc
