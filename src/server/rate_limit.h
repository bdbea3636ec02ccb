// Requests per minute per client (an API key, or an address when the server has no keys): a token
// bucket per client that holds up to the limit and refills at limit / 60 per second, so a client
// may burst up to a minute's worth and then runs at the limit. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hz {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // 0 = no limit.
  explicit RateLimiter(int32_t requests_per_minute) : limit_(requests_per_minute) {}

  struct Decision {
    bool allowed = true;
    int32_t limit = 0;      // requests per minute
    int32_t remaining = 0;  // whole requests left in the client's bucket after this one
    double retry_after_s = 0;  // refused: seconds until one request is allowed again
    double reset_s = 0;        // seconds until the bucket is full again
  };
  // Takes one request from `client`'s bucket when it holds one.
  Decision take(std::string_view client, Clock::time_point now = Clock::now());
  bool enabled() const { return limit_ > 0; }
  // Buckets held (clients seen recently); full buckets are forgotten when there are many.
  size_t clients() const;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point updated;
  };
  // Drops the buckets that have refilled completely (they would start full anyway).
  void prune(Clock::time_point now);

  const int32_t limit_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace hz
