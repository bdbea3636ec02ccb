#include "kvstore/hotness_policy.h"

#include <cmath>
#include <list>

namespace hz::kvstore {

namespace {

class LruPolicy : public HotnessPolicy {
 public:
  const char* name() const override { return "lru"; }
  void touch(uint64_t key) override {
    auto it = pos_.find(key);
    if (it != pos_.end()) order_.erase(it->second);
    pos_[key] = order_.insert(order_.end(), key);
  }
  void erase(uint64_t key) override {
    auto it = pos_.find(key);
    if (it == pos_.end()) return;
    order_.erase(it->second);
    pos_.erase(it);
  }
  std::optional<uint64_t> coldest() const override {
    if (order_.empty()) return std::nullopt;
    return order_.front();
  }
  std::optional<uint64_t> coldest_where(const std::function<bool(uint64_t)>& eligible) const override {
    for (uint64_t k : order_) {
      if (eligible(k)) return k;
    }
    return std::nullopt;
  }
  size_t size() const override { return pos_.size(); }

 private:
  std::list<uint64_t> order_;  // least recently touched first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> pos_;
};

// The decayed count of a key at time t is c * 2^-((t - t_last) / H). Comparing two keys at the same t,
// the common 2^(-t/H) factor cancels, so log2(c) + t_last / H is a time-independent priority: keys
// sit in an ordered set and never need re-scoring as the clock advances.
class LfuDecayPolicy : public HotnessPolicy {
 public:
  explicit LfuDecayPolicy(double half_life) : half_life_(half_life > 0 ? half_life : 1) {}
  const char* name() const override { return "lfu-decay"; }
  void touch(uint64_t key) override {
    const double now = static_cast<double>(++clock_);
    auto it = state_.find(key);
    double count = 1;
    if (it != state_.end()) {
      count = it->second.count * std::exp2(-(now - it->second.last) / half_life_) + 1;
      order_.erase({it->second.priority, key});
    }
    const double prio = std::log2(count) + now / half_life_;
    state_[key] = {count, now, prio};
    order_.insert({prio, key});
  }
  void erase(uint64_t key) override {
    auto it = state_.find(key);
    if (it == state_.end()) return;
    order_.erase({it->second.priority, key});
    state_.erase(it);
  }
  std::optional<uint64_t> coldest() const override {
    if (order_.empty()) return std::nullopt;
    return order_.begin()->second;
  }
  std::optional<uint64_t> coldest_where(const std::function<bool(uint64_t)>& eligible) const override {
    for (const auto& [prio, k] : order_) {
      if (eligible(k)) return k;
    }
    return std::nullopt;
  }
  size_t size() const override { return state_.size(); }

 private:
  struct State {
    double count, last, priority;
  };
  double half_life_;
  uint64_t clock_ = 0;
  std::unordered_map<uint64_t, State> state_;
  std::set<std::pair<double, uint64_t>> order_;  // coldest first
};

}  // namespace

std::unique_ptr<HotnessPolicy> make_lru_policy() { return std::make_unique<LruPolicy>(); }
std::unique_ptr<HotnessPolicy> make_lfu_decay_policy(double half_life) { return std::make_unique<LfuDecayPolicy>(half_life); }

Result<std::unique_ptr<HotnessPolicy>> make_policy(std::string_view name, const char* flag) {
  if (name == "lru") return make_lru_policy();
  if (name == "lfu-decay" || name == "lfu") return make_lfu_decay_policy();
  return invalid_argument("{} '{}' is not one of lru, lfu-decay", flag, name);
}

}  // namespace hz::kvstore
