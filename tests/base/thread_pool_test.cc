// ThreadPool: every task runs exactly once on one of the pool's threads; a job marked small runs in
// order on the calling thread alone; parallel_range covers [0, n) in contiguous ranges.
#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace hz {
namespace {

TEST(ThreadPoolTest, RunsEveryTaskOnceOnAPoolThread) {
  ThreadPool pool(3);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}}) {
    std::vector<std::atomic<int>> runs(n);
    std::atomic<bool> bad_thread{false};
    pool.parallel_for(n, [&](int64_t t, int thread_idx) {
      runs[t].fetch_add(1);
      if (thread_idx < 0 || thread_idx >= pool.num_threads()) bad_thread = true;
    });
    for (int64_t t = 0; t < n; ++t) EXPECT_EQ(runs[t].load(), 1) << "task " << t << " of " << n;
    EXPECT_FALSE(bad_thread.load());
  }
}

TEST(ThreadPoolTest, SmallJobRunsInOrderOnTheCallingThread) {
  ThreadPool pool(3);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<int64_t> order;
  bool elsewhere = false;
  pool.parallel_for(50, [&](int64_t t, int thread_idx) {
    order.push_back(t);  // unsynchronized on purpose: one thread only
    if (thread_idx != 0 || std::this_thread::get_id() != caller) elsewhere = true;
  }, /*small=*/true);
  ASSERT_EQ(order.size(), 50u);
  for (int64_t t = 0; t < 50; ++t) EXPECT_EQ(order[t], t);
  EXPECT_FALSE(elsewhere);
  // And a job that is not small still reaches every task.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t t, int) { sum += t; }, /*small=*/false);
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPoolTest, ParallelRangeCoversEveryIndexOnce) {
  ThreadPool pool(2);
  for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{1001}}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_range(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << i << " of " << n;
  }
}

}  // namespace
}  // namespace hz
