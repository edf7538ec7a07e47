// WorkerPool (runtime/worker_pool.h): every index runs once, on the caller and the workers at
// once; the same threads serve every run; errors come back from the lowest failing index after
// every index ran.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/worker_pool.h"

namespace minfer {
namespace {

long tid() { return static_cast<long>(::syscall(SYS_gettid)); }

TEST(WorkerPool, EveryIndexOnceWithTheCallerAndWorkersTogether) {
  WorkerPool pool(3);
  EXPECT_EQ(pool.n_workers(), 3);
  // Four jobs that each wait (up to 10 s) until all four run at once: only the caller and the
  // three workers together can finish them quickly.
  std::atomic<int> running{0};
  std::vector<std::atomic<int>> calls(4);
  std::atomic<bool> together{true};
  pool.run(4, [&](size_t i) {
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
  pool.run(many.size(), [&](size_t i) { many[i]++; });
  for (auto& c : many) ASSERT_EQ(c.load(), 1);
  pool.run(0, [&](size_t) { FAIL() << "no index to run"; });
}

// The pool's threads start once: a thousand runs see at most the caller and the three workers
// (Linux thread ids are not reused this soon; threads started per run would each bring a new one).
TEST(WorkerPool, TheSameThreadsServeEveryRun) {
  WorkerPool pool(3);
  std::mutex mu;
  std::set<long> seen;
  for (int run = 0; run < 1000; ++run)
    pool.run(4, [&](size_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      std::lock_guard<std::mutex> lk(mu);
      seen.insert(tid());
    });
  EXPECT_LE(seen.size(), 4u);
  EXPECT_GE(seen.size(), 2u) << "the workers never took a job";
  EXPECT_TRUE(seen.count(tid()));
}

TEST(WorkerPool, LowestFailingIndexIsRethrownAfterEveryIndexRan) {
  WorkerPool pool(2);
  std::atomic<int> ran{0};
  try {
    pool.run(50, [&](size_t i) {
      ran++;
      if (i == 31 || i == 7) throw std::runtime_error(std::to_string(i));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "7");
  }
  EXPECT_EQ(ran.load(), 50);
  ran = 0;
  pool.run(10, [&](size_t) { ran++; });  // the pool works on, with no error left over
  EXPECT_EQ(ran.load(), 10);
}

TEST(WorkerPool, NoWorkersRunsOnTheCaller) {
  WorkerPool pool(0);
  const long caller = tid();
  std::vector<size_t> order;
  pool.run(5, [&](size_t i) {
    EXPECT_EQ(tid(), caller);
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace minfer
