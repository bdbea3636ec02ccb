#include "server/request_workers.h"

namespace hz {

RequestWorkers::RequestWorkers(int num_threads, size_t max_pending) : max_pending_(max_pending) {
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { run(); });
}

RequestWorkers::~RequestWorkers() { stop(); }

bool RequestWorkers::try_post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || threads_.empty() || queue_.size() + running_ >= max_pending_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void RequestWorkers::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  threads_.clear();
}

size_t RequestWorkers::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + running_;
}

void RequestWorkers::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    task();
    task = nullptr;  // what it captured goes before the count does
    lock.lock();
    --running_;
  }
}

}  // namespace hz
