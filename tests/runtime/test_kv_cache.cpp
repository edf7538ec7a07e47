// The paged KV cache's bookkeeping: sequences, block tables, forks with copy on write, truncation,
// an exhausted pool that fails only the sequence that asked, cached prefix blocks, and a random
// walk that must end with every block free.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "common/test_util.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/kv_cache.h"

namespace minfer::test {
namespace {

CpuBackend& cpu() {
  static CpuBackend b(1);
  return b;
}

KvCache make(int32_t n_ctx, int32_t bs, int32_t n_seq, int32_t n_ctx_seq = 0) {
  KvCacheParams p;
  p.n_ctx = n_ctx;
  p.block_size = bs;
  p.n_seq_max = n_seq;
  p.n_ctx_seq = n_ctx_seq;
  p.type = DType::F32;
  return KvCache(cpu(), 2, 2, 32, 32, p);
}

// A K row of layer 0 (both heads), read from host memory.
std::vector<float> k_row(const KvCache& kv, int32_t cell) {
  const Tensor* k = kv.k(0);
  const auto* p = reinterpret_cast<const float*>(static_cast<const char*>(k->data) + k->nb[2] * static_cast<size_t>(cell));
  return {p, p + 64};
}
void set_k_row(KvCache& kv, int32_t cell, float v) {
  Tensor* k = kv.k(0);
  std::fill_n(reinterpret_cast<float*>(static_cast<char*>(k->data) + k->nb[2] * static_cast<size_t>(cell)), 64, v);
}

std::vector<int32_t> table_row(const KvCache& kv, int32_t s) {
  const auto* t = static_cast<const int32_t*>(kv.block_table()->data);
  return {t + static_cast<size_t>(s) * static_cast<size_t>(kv.max_blocks_per_seq()),
          t + static_cast<size_t>(s + 1) * static_cast<size_t>(kv.max_blocks_per_seq())};
}

TEST(KvCache, PoolIsWhatNCtxAsksForRoundedToBlocks) {
  auto kv = make(100, 16, 4);
  EXPECT_EQ(kv.n_blocks(), 7);
  EXPECT_EQ(kv.n_ctx(), 112);
  EXPECT_EQ(kv.k(0)->ne[2], 8 * 16);  // + the null block
  EXPECT_EQ(kv.n_ctx_seq(), 112);
  EXPECT_THROW(make(100, 12, 1), std::invalid_argument);
  EXPECT_THROW(make(0, 16, 1), std::invalid_argument);
}

// Cells are int32 indices (the null block's too): a -c whose blocks would pass 2^31 - 1 cells is a
// clear error (it overflowed into "n_blocks must be >= 0, got -67108864"), and a -c no memory
// holds fails at the cache's allocation, before any per-block bookkeeping (1e9 one-cell blocks
// took 10 GB of host memory and a minute before the out-of-memory message).
TEST(KvCache, ContextPastTheIndexRangeOrMemoryIsAClearError) {
  for (const auto& [n_ctx, bs] : {std::pair{INT32_MAX - 30, 32}, {INT32_MAX, 1024}, {INT32_MAX, 1}}) {
    try {
      make(n_ctx, bs, 1);
      ADD_FAILURE() << "-c " << n_ctx << " with blocks of " << bs << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("cells a cache can index"), std::string::npos) << e.what();
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(make(1 << 30, 1, 1), OutOfMemoryError);  // 1 KiB a cell: 1 TiB
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "host bookkeeping before the allocation";
}

TEST(KvCache, AppendGivesCellsInTheSequencesOwnBlocksAndTheTableFollows) {
  auto kv = make(256, 16, 3);
  const int32_t a = kv.seq_new(), b = kv.seq_new();
  std::vector<int32_t> ca, cb;
  kv.seq_append(a, 20, ca);
  kv.seq_append(b, 5, cb);
  kv.seq_append(a, 13, ca);
  EXPECT_EQ(kv.seq_len(a), 33);
  EXPECT_EQ(kv.seq_blocks(a).size(), 3u);
  std::set<int32_t> all(ca.begin(), ca.end());
  for (int32_t c : cb) EXPECT_FALSE(all.contains(c)) << "cell " << c << " of b is a's";
  all.insert(cb.begin(), cb.end());
  EXPECT_EQ(all.size(), 38u);
  for (int32_t p = 0; p < 33; ++p) EXPECT_EQ(kv.cell(a, p), ca[static_cast<size_t>(p)]);
  kv.sync();
  auto row = table_row(kv, a);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(row[i], kv.seq_blocks(a)[i]);
  EXPECT_EQ(row[3], kv.n_blocks());  // the null block past the end
  EXPECT_EQ(table_row(kv, kv.null_seq())[0], kv.n_blocks());
}

TEST(KvCache, ForkSharesBlocksAndCopiesAPartlyFilledLastBlockOnWrite) {
  auto kv = make(256, 16, 3);
  const int32_t a = kv.seq_new();
  std::vector<int32_t> ca;
  kv.seq_append(a, 20, ca);  // one full block, 4 cells in the second
  for (int32_t p = 0; p < 20; ++p) set_k_row(kv, ca[static_cast<size_t>(p)], static_cast<float>(p + 1));
  const int32_t b = kv.seq_fork(a);
  EXPECT_EQ(kv.seq_blocks(b), kv.seq_blocks(a));
  EXPECT_EQ(kv.pool().ref_count(kv.seq_blocks(a)[0]), 2);
  EXPECT_EQ(kv.blocks_needed(b, 1), 1);  // the copy of the shared partial block
  std::vector<int32_t> cb;
  kv.seq_append(b, 1, cb);
  EXPECT_EQ(kv.seq_blocks(b)[0], kv.seq_blocks(a)[0]);  // the full block stays shared
  EXPECT_NE(kv.seq_blocks(b)[1], kv.seq_blocks(a)[1]);  // the partial one was copied
  for (int32_t p = 16; p < 20; ++p) EXPECT_EQ(k_row(kv, kv.cell(b, p)), k_row(kv, kv.cell(a, p)));
  set_k_row(kv, cb[0], -5.0f);
  EXPECT_EQ(k_row(kv, cb[0])[0], -5.0f);
  // a's own next cell is in its own block and a never sees b's row.
  std::vector<int32_t> ca2;
  kv.seq_append(a, 1, ca2);
  EXPECT_NE(ca2[0], cb[0]);
  EXPECT_EQ(kv.pool().ref_count(kv.seq_blocks(a)[1]), 1);
  kv.seq_free(a);
  kv.seq_free(b);
  EXPECT_EQ(kv.pool().n_used(), 0);
}

TEST(KvCache, TruncateReturnsWholeBlocks) {
  auto kv = make(256, 16, 1);
  const int32_t a = kv.seq_new();
  std::vector<int32_t> c;
  kv.seq_append(a, 50, c);
  EXPECT_EQ(kv.pool().n_used(), 4);
  kv.seq_truncate(a, 17);
  EXPECT_EQ(kv.pool().n_used(), 2);
  EXPECT_EQ(kv.seq_len(a), 17);
  EXPECT_THROW(kv.seq_truncate(a, 18), std::out_of_range);
  kv.seq_truncate(a, 0);
  EXPECT_EQ(kv.pool().n_used(), 0);
}

TEST(KvCache, ExhaustedPoolFailsOnlyTheSequenceThatAsks) {
  auto kv = make(64, 16, 2);
  const int32_t a = kv.seq_new(), b = kv.seq_new();
  std::vector<int32_t> c;
  kv.seq_append(a, 40, c);  // 3 blocks
  kv.seq_append(b, 10, c);  // 1 block: the pool is full
  const auto blocks_a = kv.seq_blocks(a), blocks_b = kv.seq_blocks(b);
  c.clear();
  try {
    kv.seq_append(b, 7, c);
    FAIL() << "no KvPoolFullError";
  } catch (const KvPoolFullError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(kv.seq_len(b), 10);
  EXPECT_EQ(kv.seq_blocks(b), blocks_b);
  EXPECT_EQ(kv.seq_len(a), 40);
  EXPECT_EQ(kv.seq_blocks(a), blocks_a);
  kv.seq_append(b, 6, c);  // still fits its block
  EXPECT_EQ(kv.seq_len(b), 16);
}

TEST(KvCache, SequenceLongerThanItsContextIsContextFull) {
  auto kv = make(256, 16, 2, 40);
  const int32_t a = kv.seq_new();
  std::vector<int32_t> c;
  kv.seq_append(a, 40, c);
  EXPECT_THROW(kv.seq_append(a, 1, c), ContextFullError);
  EXPECT_EQ(kv.seq_len(a), 40);
  EXPECT_EQ(kv.max_blocks_per_seq(), 3);
}

TEST(KvCache, TooManySequencesIsAnError) {
  auto kv = make(64, 16, 2);
  kv.seq_new();
  kv.seq_new();
  EXPECT_THROW(kv.seq_new(), std::runtime_error);
}

TEST(KvCache, CachedPrefixBlocksAreFoundAfterTheirSequenceEnds) {
  auto kv = make(64, 16, 2);
  const int32_t a = kv.seq_new();
  std::vector<int32_t> c;
  kv.seq_append(a, 20, c);
  set_k_row(kv, c[3], 7.0f);
  EXPECT_TRUE(kv.set_block_hash(a, 0, 1234));
  EXPECT_THROW(kv.set_block_hash(a, 1, 99), std::out_of_range);  // not full
  kv.seq_free(a);
  EXPECT_EQ(kv.pool().n_cached(), 1);
  const int32_t b = kv.seq_new();
  EXPECT_FALSE(kv.seq_append_cached(b, 999));
  EXPECT_TRUE(kv.seq_append_cached(b, 1234));
  EXPECT_EQ(kv.seq_len(b), 16);
  EXPECT_EQ(k_row(kv, kv.cell(b, 3))[0], 7.0f);
}

// Random new / fork / append / truncate / free over a small pool: every live cell belongs to one
// block the sequence holds, reference counts equal the number of sequences holding a block, and
// freeing everything frees every block.
TEST(KvCache, RandomWalkKeepsCountsAndEndsWithEveryBlockFree) {
  auto kv = make(256, 8, 6);
  std::vector<int32_t> live;
  for (int step = 0; step < 5000; ++step) {
    const int64_t what = rand_int(0, 5);
    std::vector<int32_t> c;
    if (what == 0 && static_cast<int32_t>(live.size()) < kv.n_seq_max()) {
      live.push_back(kv.seq_new());
    } else if (what == 1 && !live.empty() && static_cast<int32_t>(live.size()) < kv.n_seq_max()) {
      live.push_back(kv.seq_fork(live[static_cast<size_t>(rand_int(0, static_cast<int64_t>(live.size()) - 1))]));
    } else if (what <= 3 && !live.empty()) {
      const int32_t s = live[static_cast<size_t>(rand_int(0, static_cast<int64_t>(live.size()) - 1))];
      const auto n = static_cast<int32_t>(rand_int(1, 20));
      const int32_t len = kv.seq_len(s);
      try {
        kv.seq_append(s, n, c);
        ASSERT_EQ(kv.seq_len(s), len + n);
      } catch (const KvPoolFullError&) {
        ASSERT_EQ(kv.seq_len(s), len);
      } catch (const ContextFullError&) {
        ASSERT_EQ(kv.seq_len(s), len);
      }
    } else if (what == 4 && !live.empty()) {
      const int32_t s = live[static_cast<size_t>(rand_int(0, static_cast<int64_t>(live.size()) - 1))];
      kv.seq_truncate(s, static_cast<int32_t>(rand_int(0, kv.seq_len(s))));
    } else if (!live.empty()) {
      const size_t i = static_cast<size_t>(rand_int(0, static_cast<int64_t>(live.size()) - 1));
      kv.seq_free(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    std::map<int32_t, int32_t> holders;
    for (int32_t s : live) {
      const auto& bl = kv.seq_blocks(s);
      ASSERT_EQ(static_cast<int32_t>(bl.size()), (kv.seq_len(s) + 7) / 8);
      for (int32_t b : bl) ++holders[b];
    }
    for (const auto& [b, n] : holders) ASSERT_EQ(kv.pool().ref_count(b), n) << "block " << b;
    ASSERT_EQ(kv.pool().n_used(), static_cast<int32_t>(holders.size()));
  }
  for (int32_t s : live) kv.seq_free(s);
  EXPECT_EQ(kv.pool().n_used(), 0);
  EXPECT_EQ(kv.pool().n_free(), kv.n_blocks());
  EXPECT_EQ(kv.n_seq(), 0);
}

}  // namespace
}  // namespace minfer::test
