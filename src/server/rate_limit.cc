#include "server/rate_limit.h"

#include <algorithm>
#include <cmath>

namespace hz {

namespace {

// Beyond this many clients, full buckets are dropped before a new one is added.
constexpr size_t kPruneAbove = 4096;

}  // namespace

RateLimiter::Decision RateLimiter::take(std::string_view client, Clock::time_point now) {
  Decision d;
  d.limit = limit_;
  if (limit_ <= 0) return d;
  const double cap = limit_;
  const double per_second = cap / 60.0;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = buckets_.find(std::string(client));
  if (it == buckets_.end()) {
    if (buckets_.size() >= kPruneAbove) prune(now);
    it = buckets_.emplace(std::string(client), Bucket{cap, now}).first;
  }
  Bucket& b = it->second;
  const double elapsed = std::chrono::duration<double>(now - b.updated).count();
  if (elapsed > 0) {
    b.tokens = std::min(cap, b.tokens + elapsed * per_second);
    b.updated = now;
  }
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
  } else {
    d.allowed = false;
    d.retry_after_s = (1.0 - b.tokens) / per_second;
  }
  d.remaining = static_cast<int32_t>(std::floor(b.tokens));
  d.reset_s = (cap - b.tokens) / per_second;
  return d;
}

size_t RateLimiter::clients() const {
  std::lock_guard<std::mutex> lk(mu_);
  return buckets_.size();
}

void RateLimiter::prune(Clock::time_point now) {
  const double per_second = limit_ / 60.0;
  std::erase_if(buckets_, [&](const auto& kv) {
    const double elapsed = std::chrono::duration<double>(now - kv.second.updated).count();
    return kv.second.tokens + elapsed * per_second >= limit_;
  });
}

}  // namespace hz
