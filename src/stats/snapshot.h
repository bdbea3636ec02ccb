// The statistics data model every source of metrics produces (the engine's stats, the server's
// registry): families with a name, help text, type and series with labels. A plain value: sources
// fill one under their own lock, renderers (Prometheus text, JSON) walk it without any lock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace hz::stats {

enum class Kind { kCounter, kGauge, kHistogram };
const char* kind_name(Kind kind);  // "counter", "gauge", "histogram" (Prometheus TYPE words)

// Label name/value pairs in order, e.g. {{"tier", "ram"}}; empty for an unlabelled series.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Counters and gauges keep integers as integers (rendered "12", not "12.0").
using Value = std::variant<int64_t, double>;

template <typename T>
Value value_of(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<double>(v);
  } else {
    return static_cast<int64_t>(v);
  }
}

struct HistogramData {
  std::vector<double> bounds;    // upper bounds (le), ascending; the +Inf bucket is implied
  std::vector<uint64_t> counts;  // [bounds.size() + 1] per bucket, not cumulative; the last is +Inf
  double sum = 0;
  uint64_t count = 0;
};

struct Series {
  Labels labels;
  Value value = int64_t{0};  // counters and gauges
  HistogramData histogram;   // histograms
};

struct Family {
  std::string name;
  std::string help;
  Kind kind = Kind::kGauge;
  std::vector<Series> series;  // may be empty (a labelled family nobody has touched yet)
};

class Snapshot {
 public:
  // The family `name`, appended on first use (families keep first-use order); the first non-empty
  // help wins, so further series of a family may pass an empty help.
  Family& family(std::string_view name, std::string_view help, Kind kind);
  void add(std::string_view name, std::string_view help, Kind kind, Labels labels, Value value);

  const std::vector<Family>& families() const { return families_; }
  const Family* find(std::string_view name) const;  // null when absent
  // Puts `name`="value" first on every series (a constant label, e.g. the served model's name).
  void label_all(const std::string& name, const std::string& value);

 private:
  std::vector<Family> families_;
};

}  // namespace hz::stats
