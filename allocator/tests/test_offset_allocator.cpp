// OffsetAllocator: best fit, alignment padding, coalescing, growth, capacity, bad input, and a
// random alloc/free walk checked against the documented placement rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <new>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "minfer/allocator.h"

namespace minfer::alloc {
namespace {

using Range = OffsetAllocator::Range;

TEST(OffsetAllocator, CoalescesAdjacentFreeRanges) {
  OffsetAllocator a;
  const size_t off_a = a.allocate(100);
  const size_t off_b = a.allocate(200);
  const size_t off_c = a.allocate(50);
  EXPECT_EQ(off_a, 0u);
  EXPECT_EQ(off_b, 100u);
  EXPECT_EQ(off_c, 300u);
  EXPECT_EQ(a.high_water(), 350u);

  a.free(off_a, 100);
  a.free(off_b, 200);
  EXPECT_EQ(a.free_ranges(), (std::vector<Range>{{0, 300}}));
  EXPECT_EQ(a.allocate(300), off_a);  // A+B sized fits at A without growth
  EXPECT_EQ(a.high_water(), 350u);
}

TEST(OffsetAllocator, CoalescesOnBothSides) {
  OffsetAllocator a;
  const size_t x = a.allocate(10);
  const size_t y = a.allocate(20);
  const size_t z = a.allocate(30);
  a.allocate(5);  // keeps z's range away from the end
  a.free(x, 10);
  a.free(z, 30);
  EXPECT_EQ(a.free_ranges(), (std::vector<Range>{{0, 10}, {30, 30}}));
  a.free(y, 20);
  EXPECT_EQ(a.free_ranges(), (std::vector<Range>{{0, 60}}));
  EXPECT_EQ(a.live_bytes(), 5u);
  EXPECT_EQ(a.n_live(), 1u);
}

TEST(OffsetAllocator, BestFitPicksSmallestRangeThatFits) {
  OffsetAllocator a;
  std::vector<size_t> offsets;
  for (size_t size : {100, 10, 50, 10, 70, 10}) offsets.push_back(a.allocate(size));
  a.free(offsets[0], 100);
  a.free(offsets[2], 50);
  a.free(offsets[4], 70);
  EXPECT_EQ(a.allocate(60), offsets[4]);   // 70-range, not the first-fit 100-range
  EXPECT_EQ(a.allocate(50), offsets[2]);   // exact fit
  EXPECT_EQ(a.allocate(100), offsets[0]);
  EXPECT_EQ(a.high_water(), 250u);
}

TEST(OffsetAllocator, TiesGoToLowestOffset) {
  OffsetAllocator a;
  std::vector<size_t> offsets;
  for (size_t size : {40, 1, 40, 1}) offsets.push_back(a.allocate(size));
  a.free(offsets[2], 40);
  a.free(offsets[0], 40);
  EXPECT_EQ(a.allocate(30), offsets[0]);
}

TEST(OffsetAllocator, BestFitCountsAlignmentPadding) {
  OffsetAllocator a;
  a.allocate(8);                     // [0, 8)
  const size_t b = a.allocate(64);   // [8, 72): fits 64 bytes, but not at 64-byte alignment
  a.allocate(8);                     // [72, 80)
  const size_t d = a.allocate(128);  // [80, 208): 64 at offset 128 fits
  a.allocate(8);                     // [208, 216)
  a.free(b, 64);
  a.free(d, 128);
  EXPECT_EQ(a.allocate(64, 64), 128u);
  // Head padding [80, 128) and tail [192, 208) went back to the free list.
  EXPECT_EQ(a.free_ranges(), (std::vector<Range>{{8, 64}, {80, 48}, {192, 16}}));
  EXPECT_EQ(a.high_water(), 216u);
}

TEST(OffsetAllocator, GrowthReturnsHeadPaddingAndExtendsTrailingRange) {
  OffsetAllocator a;
  EXPECT_EQ(a.allocate(10), 0u);
  EXPECT_EQ(a.allocate(8, 64), 64u);
  EXPECT_EQ(a.free_ranges(), (std::vector<Range>{{10, 54}}));
  EXPECT_EQ(a.allocate(54), 10u);  // the padding is usable
  EXPECT_EQ(a.high_water(), 72u);

  const size_t tail = a.allocate(28);  // [72, 100)
  a.free(tail, 28);
  EXPECT_EQ(a.allocate(50), 72u);  // extends the free range at the end instead of skipping it
  EXPECT_EQ(a.high_water(), 122u);
}

TEST(OffsetAllocator, FixedCapacityOverflowThrows) {
  OffsetAllocator a(1000);
  EXPECT_EQ(a.allocate(600), 0u);
  EXPECT_EQ(a.allocate(400), 600u);
  try {
    a.allocate(1);
    ADD_FAILURE() << "no exception";
  } catch (const ArenaOverflow& e) {
    EXPECT_EQ(std::string(e.what()), "arena of 1000 bytes cannot fit 1 more bytes (alignment 1)");
    EXPECT_EQ(e.capacity(), 1000u);
    EXPECT_EQ(e.requested(), 1u);
  }
  EXPECT_THROW(a.allocate(7), std::bad_alloc);  // catchable as a plain out-of-memory error
  EXPECT_EQ(a.high_water(), 1000u);             // unchanged by the failures
  EXPECT_EQ(a.n_live(), 2u);
  a.free(600, 400);
  EXPECT_EQ(a.allocate(300), 600u);
}

TEST(OffsetAllocator, FixedCapacityCountsAlignmentPadding) {
  OffsetAllocator a(100);
  a.allocate(10);
  EXPECT_THROW(a.allocate(50, 64), ArenaOverflow);  // 64 + 50 > 100
  EXPECT_EQ(a.allocate(50, 32), 32u);
}

TEST(OffsetAllocator, RejectsBadAlignment) {
  OffsetAllocator a;
  for (size_t alignment : {size_t{0}, size_t{3}, size_t{6}, size_t{48}}) {
    try {
      a.allocate(8, alignment);
      ADD_FAILURE() << "no exception for alignment " << alignment;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("alignment " + std::to_string(alignment)),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(a.high_water(), 0u);
}

TEST(OffsetAllocator, RejectsBadFree) {
  OffsetAllocator a;
  const size_t x = a.allocate(16);
  a.allocate(16);
  EXPECT_THROW(a.free(x + 1, 16), std::invalid_argument);  // not a block start
  EXPECT_THROW(a.free(x, 8), std::invalid_argument);       // wrong size
  a.free(x, 16);
  EXPECT_THROW(a.free(x, 16), std::invalid_argument);  // double free
  EXPECT_EQ(a.free_ranges(), (std::vector<Range>{{0, 16}}));
  EXPECT_EQ(a.live_bytes(), 16u);
}

TEST(OffsetAllocator, ZeroSizeOccupiesNothing) {
  OffsetAllocator a;
  EXPECT_EQ(a.allocate(0, 4096), 0u);
  EXPECT_EQ(a.high_water(), 0u);
  EXPECT_EQ(a.n_live(), 0u);
  a.free(0, 0);
  EXPECT_EQ(a.allocate(1), 0u);
}

TEST(OffsetAllocator, OffsetOverflowThrows) {
  OffsetAllocator a;
  const size_t huge = std::numeric_limits<size_t>::max() - 10;
  EXPECT_EQ(a.allocate(huge), 0u);
  EXPECT_THROW(a.allocate(100), std::length_error);
  EXPECT_THROW(a.allocate(1, size_t{1} << 63), std::length_error);
  EXPECT_EQ(a.high_water(), huge);
}

TEST(OffsetAllocator, ResetForgetsEverything) {
  OffsetAllocator a(64);
  a.allocate(32);
  a.allocate(16, 16);
  a.reset();
  EXPECT_EQ(a.high_water(), 0u);
  EXPECT_EQ(a.live_bytes(), 0u);
  EXPECT_TRUE(a.free_ranges().empty());
  EXPECT_EQ(a.capacity(), 64u);
  EXPECT_EQ(a.allocate(64), 0u);
}

// The offset the documented rule predicts, from the free list before the call.
size_t predicted_offset(const std::vector<Range>& free, size_t high_water, size_t size,
                        size_t alignment) {
  auto up = [&](size_t x) { return (x + alignment - 1) / alignment * alignment; };
  std::optional<Range> best;
  size_t best_offset = 0;
  for (const Range& r : free) {
    const size_t aligned = up(r.offset);
    if (aligned + size <= r.offset + r.size && (!best || r.size < best->size)) {
      best = r;
      best_offset = aligned;
    }
  }
  if (best) return best_offset;
  if (!free.empty() && free.back().offset + free.back().size == high_water) {
    return up(free.back().offset);
  }
  return up(high_water);
}

TEST(OffsetAllocatorRandom, WalkMatchesRuleAndKeepsInvariants) {
  std::mt19937_64 rng(0xa110c);
  for (int walk = 0; walk < 200; ++walk) {
    OffsetAllocator a;
    std::vector<Range> live;
    size_t max_high_water = 0;
    for (int op = 0; op < 300; ++op) {
      if (live.empty() || rng() % 5 < 3) {
        const size_t size = rng() % 8 == 0 ? 0 : 1 + rng() % 3000;
        const size_t alignment = size_t{1} << (rng() % 10);
        const size_t expected = size == 0 ? 0
                                           : predicted_offset(a.free_ranges(), a.high_water(),
                                                              size, alignment);
        const size_t offset = a.allocate(size, alignment);
        ASSERT_EQ(offset, expected) << "walk " << walk << " op " << op;
        ASSERT_EQ(offset % alignment, 0u);
        if (size != 0) live.push_back({offset, size});
      } else {
        const size_t k = rng() % live.size();
        a.free(live[k].offset, live[k].size);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
      // Live blocks are disjoint and below the high-water mark; free ranges are sorted, disjoint,
      // non-adjacent; together they tile [0, high_water) exactly.
      std::vector<Range> all = live;
      const std::vector<Range> free = a.free_ranges();
      for (size_t f = 0; f < free.size(); ++f) {
        ASSERT_GT(free[f].size, 0u);
        if (f > 0) {
          ASSERT_LT(free[f - 1].offset + free[f - 1].size, free[f].offset);
        }
      }
      all.insert(all.end(), free.begin(), free.end());
      std::sort(all.begin(), all.end(),
                [](const Range& x, const Range& y) { return x.offset < y.offset; });
      size_t cursor = 0;
      for (const Range& r : all) {
        ASSERT_EQ(r.offset, cursor) << "gap or overlap at " << cursor;
        cursor += r.size;
      }
      ASSERT_EQ(cursor, a.high_water());
      size_t live_bytes = 0;
      for (const Range& r : live) live_bytes += r.size;
      ASSERT_EQ(a.live_bytes(), live_bytes);
      ASSERT_GE(a.high_water(), max_high_water);
      max_high_water = a.high_water();
    }
  }
}

}  // namespace
}  // namespace minfer::alloc
