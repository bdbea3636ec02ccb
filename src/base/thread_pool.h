// ThreadPool: a fixed set of workers that run one parallel_for at a time.
// The calling thread takes part as worker 0. Workers spin briefly between jobs (decode issues
// hundreds of small jobs per token), then sleep on an atomic wait. Not reentrant: one
// parallel_for at a time, called from the thread that owns the pool (the engine thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace hz {

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 means the number of hardware threads.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(task_idx, thread_idx) for task_idx in [0, num_tasks), tasks taken in order from a
  // shared counter. Returns when all tasks are done. Which thread runs a task must not change
  // results: kernels give each task a fixed share of the work.
  void parallel_for(int64_t num_tasks, const std::function<void(int64_t, int)>& fn);
  // The same, but on the calling thread alone (as thread 0) when `small` is set: waking the workers
  // and joining them costs more than a tiny job takes (the caller judges by the job's size).
  void parallel_for(int64_t num_tasks, const std::function<void(int64_t, int)>& fn, bool small);

  // Splits [0, n) into num_threads contiguous ranges and runs fn(begin, end, thread_idx).
  void parallel_range(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker_loop(int thread_idx);
  void run_tasks(int thread_idx);

  int num_threads_;
  std::vector<std::thread> workers_;
  // A job is open while accepting_ is set. Workers announce themselves in active_ before touching
  // the job and re-check accepting_; the caller closes the job when all tasks are done and then
  // waits only for workers already inside it, never for workers that are asleep or descheduled
  // (on a loaded machine waiting for every worker to wake costs milliseconds per job).
  const std::function<void(int64_t, int)>* job_ = nullptr;
  int64_t num_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int64_t> done_tasks_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> accepting_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace hz
