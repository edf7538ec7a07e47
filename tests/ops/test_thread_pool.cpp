// cpu::ThreadPool (ops/cpu/thread_pool.h), the CPU kernels' pool and the scheduler's sampling
// threads: every index runs once, on the caller and the workers at once; the same threads serve
// every run; errors come back from the lowest failing chunk after every chunk ran.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu/thread_pool.h"

namespace minfer::cpu {
namespace {

long tid() { return static_cast<long>(::syscall(SYS_gettid)); }

// One index a call (grain 1, as the scheduler runs its rows).
void each(ThreadPool& pool, size_t n, const std::function<void(size_t)>& fn) {
  pool.parallel_for(static_cast<int64_t>(n), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(static_cast<size_t>(i));
  });
}

TEST(ThreadPool, EveryIndexOnceWithTheCallerAndWorkersTogether) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.n_threads(), 4);
  // Four jobs that each wait (up to 10 s) until all four run at once: only the caller and the
  // three workers together can finish them quickly.
  std::atomic<int> running{0};
  std::vector<std::atomic<int>> calls(4);
  std::atomic<bool> together{true};
  each(pool, 4, [&](size_t i) {
    calls[i]++;
    running++;
    const auto t0 = std::chrono::steady_clock::now();
    while (running.load() < 4)
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
        together = false;
        break;
      }
  });
  EXPECT_TRUE(together.load());
  for (auto& c : calls) EXPECT_EQ(c.load(), 1);
  // Many more indices than threads: each still once.
  std::vector<std::atomic<int>> many(1000);
  each(pool, many.size(), [&](size_t i) { many[i]++; });
  for (auto& c : many) ASSERT_EQ(c.load(), 1);
  each(pool, 0, [&](size_t) { FAIL() << "no index to run"; });
}

// The pool's threads start once: a thousand runs see at most the caller and the three workers
// (Linux thread ids are not reused this soon; threads started per run would each bring a new one).
TEST(ThreadPool, TheSameThreadsServeEveryRun) {
  ThreadPool pool(4);
  std::mutex mu;
  std::set<long> seen;
  for (int run = 0; run < 1000; ++run)
    each(pool, 4, [&](size_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      std::lock_guard<std::mutex> lk(mu);
      seen.insert(tid());
    });
  EXPECT_LE(seen.size(), 4u);
  EXPECT_GE(seen.size(), 2u) << "the workers never took a job";
  EXPECT_TRUE(seen.count(tid()));
}

// 50 items over 3 threads come in chunks of 5; the chunks holding items 7 and 31 throw, from
// whichever threads take them: the error is always the chunk of item 7's, and every chunk ran.
TEST(ThreadPool, LowestFailingChunkIsRethrownAfterEveryChunkRan) {
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  for (int round = 0; round < 20; ++round) {
    ran = 0;
    try {
      pool.parallel_for(50, 1, [&](int64_t b, int64_t e) {
        ran += static_cast<int>(e - b);
        for (const int bad : {31, 7})
          if (b <= bad && bad < e) throw std::runtime_error(std::to_string(bad));
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "7");
    }
    EXPECT_EQ(ran.load(), 50);
  }
  ran = 0;
  each(pool, 10, [&](size_t) { ran++; });  // the pool works on, with no error left over
  EXPECT_EQ(ran.load(), 10);
}

// Back-to-back jobs of random sizes: a worker that wakes late finds a later job than the one that
// woke it, and must neither run the later job's items under the old job's function nor let a job
// end before its items ran. Each job's function writes its own tag; every item once per job.
TEST(ThreadPool, BackToBackJobsNeverMixAndNeverEndEarly) {
  ThreadPool pool(4);
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  std::vector<std::atomic<int>> hits(97);
  std::vector<std::atomic<int>> tag(97);
  for (int job = 1; job <= 20000; ++job) {
    const auto n = static_cast<size_t>(1 + rng() % hits.size());
    for (size_t i = 0; i < n; ++i) hits[i] = 0;
    each(pool, n, [&, job](size_t i) {
      hits[i]++;
      tag[i] = job;
    });
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[i].load(), 1) << "job " << job << " item " << i << " of " << n;
      ASSERT_EQ(tag[i].load(), job) << "job " << job << " item " << i;
    }
  }
}

TEST(ThreadPool, OneThreadRunsOnTheCaller) {
  ThreadPool pool(1);
  const long caller = tid();
  std::vector<size_t> order;
  each(pool, 5, [&](size_t i) {
    EXPECT_EQ(tid(), caller);
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace minfer::cpu
