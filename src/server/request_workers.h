// RequestWorkers: a few threads that run the CPU-heavy half of a request (JSON parsing, chat
// rendering, tokenization) so that the HTTP I/O threads stay free for /health, /ready and running
// streams. The queue is bounded: past it, requests are refused at once instead of piling up.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hz {

class RequestWorkers {
 public:
  // `max_pending`: tasks queued or running at most.
  RequestWorkers(int num_threads, size_t max_pending);
  ~RequestWorkers();  // stop()
  RequestWorkers(const RequestWorkers&) = delete;
  RequestWorkers& operator=(const RequestWorkers&) = delete;

  // Queues `task`; false (and `task` dropped) when max_pending tasks are in the pool or after stop().
  bool try_post(std::function<void()> task);
  // Runs what is queued to the end, then joins the threads. Idempotent.
  void stop();
  size_t pending() const;

 private:
  void run();

  const size_t max_pending_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace hz
