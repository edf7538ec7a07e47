// ThreadPool and produce_rows: every row produced exactly once and emitted in order, whatever the
// thread count and row size; exceptions surface on the caller.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <stdexcept>

#include "common/test_util.h"
#include "quantize/parallel.h"

namespace minfer::test {
namespace {

TEST(ThreadPool, RunsEveryIndexOnce) {
  for (int threads : {1, 2, 5}) {
    quantize::ThreadPool pool(threads);
    EXPECT_EQ(pool.n_threads(), threads);
    for (int64_t n : {0, 1, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run(n, [&](int64_t i) { hits[static_cast<size_t>(i)]++; });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " threads, n " << n;
    }
  }
}

TEST(ThreadPool, RethrowsAndStaysUsable) {
  quantize::ThreadPool pool(3);
  EXPECT_THROW(pool.run(100, [](int64_t i) { if (i == 37) throw std::runtime_error("task 37"); }), std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.run(10, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 45);
}

TEST(ProduceRows, EmitsAllRowsInOrder) {
  for (int threads : {1, 2, 4}) {
    quantize::ThreadPool pool(threads);
    for (int64_t n_rows : {1, 3, 100, 2049}) {
      for (int64_t row_elems : {1, 32, 5000}) {
        const size_t row_bytes = 8;
        const uint64_t salt = static_cast<uint64_t>(rand_int(1, 1 << 30));
        std::vector<uint8_t> got;
        int64_t reported = 0;
        quantize::produce_rows(
            pool, n_rows, row_bytes, row_elems,
            [&](int64_t r0, int64_t n, uint8_t* dst) {
              for (int64_t r = r0; r < r0 + n; ++r) {
                const uint64_t v = static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ull ^ salt;
                std::memcpy(dst + static_cast<size_t>(r - r0) * row_bytes, &v, 8);
              }
            },
            [&](const void* p, size_t nb) {
              const auto* b = static_cast<const uint8_t*>(p);
              got.insert(got.end(), b, b + nb);
            },
            [&](int64_t n) { reported += n; }, /*task_elems=*/4096);
        ASSERT_EQ(got.size(), static_cast<size_t>(n_rows) * row_bytes);
        EXPECT_EQ(reported, n_rows);
        for (int64_t r = 0; r < n_rows; ++r) {
          uint64_t v;
          std::memcpy(&v, got.data() + static_cast<size_t>(r) * row_bytes, 8);
          ASSERT_EQ(v, static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ull ^ salt) << "row " << r;
        }
      }
    }
  }
}

TEST(ProduceRows, ProducerAndEmitterErrorsPropagate) {
  quantize::ThreadPool pool(2);
  auto produce_fail = [](int64_t r0, int64_t n, uint8_t*) {
    if (r0 <= 500 && 500 < r0 + n) throw std::runtime_error("row 500");
  };
  EXPECT_THROW(quantize::produce_rows(pool, 1000, 4, 64, produce_fail, [](const void*, size_t) {}), std::runtime_error);
  int emits = 0;
  auto emit_fail = [&](const void*, size_t) {
    if (++emits == 2) throw std::runtime_error("disk full");
  };
  EXPECT_THROW(quantize::produce_rows(pool, 100000, 4, 64, [](int64_t, int64_t, uint8_t*) {}, emit_fail),
               std::runtime_error);
  // The pool is idle again afterwards.
  std::atomic<int> k{0};
  pool.run(5, [&](int64_t) { ++k; });
  EXPECT_EQ(k.load(), 5);
}

}  // namespace
}  // namespace minfer::test
