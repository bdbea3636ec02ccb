#include "base/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hz {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spin iterations before a worker falls back to sleeping on the generation counter.
constexpr int kSpinIterations = 20000;

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_tasks(int thread_idx) {
  const auto& fn = *job_;
  for (;;) {
    int64_t t = next_task_.fetch_add(1, std::memory_order_acq_rel);
    if (t >= num_tasks_) break;
    fn(t, thread_idx);
    done_tasks_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop(int thread_idx) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    int spins = 0;
    while (g == seen) {
      if (++spins < kSpinIterations) {
        cpu_relax();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    active_.fetch_add(1);  // seq_cst, with accepting_ below: a Dekker pair with parallel_for's close
    // The job may have closed (and a new one opened) while this worker was waking up.
    if (accepting_.load() && generation_.load() == g) run_tasks(thread_idx);
    active_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t num_tasks, const std::function<void(int64_t, int)>& fn) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  job_ = &fn;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  done_tasks_.store(0, std::memory_order_relaxed);
  accepting_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_tasks(0);
  int spins = 0;
  while (done_tasks_.load(std::memory_order_acquire) != num_tasks) {
    if (++spins < 4096) cpu_relax(); else std::this_thread::yield();
  }
  accepting_.store(false);
  // Workers inside the job have found no task left or are leaving; wait for them so the next job
  // does not start under them.
  while (active_.load() != 0) std::this_thread::yield();
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t num_tasks, const std::function<void(int64_t, int)>& fn, bool small) {
  if (!small) return parallel_for(num_tasks, fn);
  for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
}

void ThreadPool::parallel_range(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  int64_t parts = std::min<int64_t>(n, num_threads_);
  parallel_for(parts, [&](int64_t p, int thread_idx) {
    int64_t begin = n * p / parts;
    int64_t end = n * (p + 1) / parts;
    fn(begin, end, thread_idx);
  });
}

}  // namespace hz
