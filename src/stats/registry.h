// A live statistics registry: counters, gauges and histograms registered once (name, help, labels)
// and updated from any thread; collect() copies them into a Snapshot for rendering.
// Thread-safety: Counter and Gauge are lock-free atomics; Histogram and LabeledCounter lock their
// own small mutex per update; registration and collect() lock the registry. A collected snapshot is
// consistent per metric, not across metrics (fine for monitoring; the engine publishes its own
// coherent snapshot, see runtime/engine_stats.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stats/snapshot.h"

namespace hz::stats {

class Counter {
 public:
  void inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void add(int64_t d) { value_.fetch_add(d, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// A cumulative histogram with fixed upper bounds, as Prometheus expects.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value, uint64_t times = 1);
  uint64_t count() const;
  HistogramData data() const;

 private:
  mutable std::mutex mu_;
  HistogramData data_;
};

// A counter family with one label whose values appear at run time (status codes, finish reasons).
class LabeledCounter {
 public:
  void inc(const std::string& label_value, uint64_t n = 1);
  std::map<std::string, uint64_t> values() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> values_;
};

class Registry {
 public:
  // Each returns a metric that lives as long as the registry. A name is registered once; labels
  // tell series of one family apart (same name, other labels).
  Counter& counter(std::string name, std::string help, Labels labels = {});
  Gauge& gauge(std::string name, std::string help, Labels labels = {});
  Histogram& histogram(std::string name, std::string help, std::vector<double> bounds, Labels labels = {});
  LabeledCounter& labeled_counter(std::string name, std::string help, std::string label_name);

  // Appends every registered metric, in registration order.
  void collect(Snapshot& out) const;

 private:
  struct Entry {
    std::string name, help;
    Labels labels;
    std::string label_name;  // labeled counters
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    std::unique_ptr<LabeledCounter> labeled;
  };
  Entry& add(std::string name, std::string help, Labels labels);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace hz::stats
