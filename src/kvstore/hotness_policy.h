// HotnessPolicy: decides which block of a tier is the coldest, i.e. evicted first. LRU orders by
// last access; LFU-with-decay keeps a per-block access count that decays exponentially with a
// half-life (in accesses), so a block used often long ago cools down and recency still counts.
// Time is logical (one tick per touch), which makes the order deterministic and testable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/status.h"

namespace hz::kvstore {

class HotnessPolicy {
 public:
  virtual ~HotnessPolicy() = default;
  virtual const char* name() const = 0;
  // A block was written or read (insert when unknown).
  virtual void touch(uint64_t key) = 0;
  virtual void erase(uint64_t key) = 0;
  // The coldest key, or nullopt when empty.
  virtual std::optional<uint64_t> coldest() const = 0;
  // The coldest key for which `eligible` holds (walks from the coldest up), or nullopt.
  virtual std::optional<uint64_t> coldest_where(const std::function<bool(uint64_t)>& eligible) const = 0;
  virtual size_t size() const = 0;
};

std::unique_ptr<HotnessPolicy> make_lru_policy();
// half_life: accesses (ticks) after which an untouched block's count halves.
std::unique_ptr<HotnessPolicy> make_lfu_decay_policy(double half_life = 4096);
// "lru" or "lfu-decay"; errors name `flag`.
Result<std::unique_ptr<HotnessPolicy>> make_policy(std::string_view name, const char* flag);

}  // namespace hz::kvstore
