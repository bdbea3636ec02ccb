#include "stats/registry.h"

#include <algorithm>

#include "base/check.h"

namespace hz::stats {

Histogram::Histogram(std::vector<double> bounds) {
  HZ_CHECK_MSG(std::is_sorted(bounds.begin(), bounds.end()), "histogram bounds must ascend");
  data_.counts.assign(bounds.size() + 1, 0);
  data_.bounds = std::move(bounds);
}

void Histogram::observe(double value, uint64_t times) {
  if (times == 0) return;
  const auto& b = data_.bounds;  // immutable after construction: read without the lock
  size_t idx = std::lower_bound(b.begin(), b.end(), value) - b.begin();  // le: value <= bound
  std::lock_guard<std::mutex> lock(mu_);
  data_.counts[idx] += times;
  data_.sum += value * static_cast<double>(times);
  data_.count += times;
}

uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.count;
}

HistogramData Histogram::data() const {
  std::lock_guard<std::mutex> lock(mu_);
  return data_;
}

void LabeledCounter::inc(const std::string& label_value, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[label_value] += n;
}

std::map<std::string, uint64_t> LabeledCounter::values() const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_;
}

Registry::Entry& Registry::add(std::string name, std::string help, Labels labels) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries_) {
    HZ_CHECK_MSG(e->name != name || e->labels != labels, "a metric was registered twice");
  }
  auto& e = entries_.emplace_back(std::make_unique<Entry>());
  e->name = std::move(name);
  e->help = std::move(help);
  e->labels = std::move(labels);
  return *e;
}

Counter& Registry::counter(std::string name, std::string help, Labels labels) {
  Entry& e = add(std::move(name), std::move(help), std::move(labels));
  e.counter = std::make_unique<Counter>();
  return *e.counter;
}

Gauge& Registry::gauge(std::string name, std::string help, Labels labels) {
  Entry& e = add(std::move(name), std::move(help), std::move(labels));
  e.gauge = std::make_unique<Gauge>();
  return *e.gauge;
}

Histogram& Registry::histogram(std::string name, std::string help, std::vector<double> bounds, Labels labels) {
  Entry& e = add(std::move(name), std::move(help), std::move(labels));
  e.histogram = std::make_unique<Histogram>(std::move(bounds));
  return *e.histogram;
}

LabeledCounter& Registry::labeled_counter(std::string name, std::string help, std::string label_name) {
  Entry& e = add(std::move(name), std::move(help), {});
  e.label_name = std::move(label_name);
  e.labeled = std::make_unique<LabeledCounter>();
  return *e.labeled;
}

void Registry::collect(Snapshot& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries_) {
    if (e->counter) {
      out.add(e->name, e->help, Kind::kCounter, e->labels, value_of(e->counter->value()));
    } else if (e->gauge) {
      out.add(e->name, e->help, Kind::kGauge, e->labels, value_of(e->gauge->value()));
    } else if (e->histogram) {
      Series& s = out.family(e->name, e->help, Kind::kHistogram).series.emplace_back();
      s.labels = e->labels;
      s.histogram = e->histogram->data();
    } else if (e->labeled) {
      Family& f = out.family(e->name, e->help, Kind::kCounter);
      for (const auto& [label_value, n] : e->labeled->values()) {
        Series& s = f.series.emplace_back();
        s.labels = {{e->label_name, label_value}};
        s.value = value_of(n);
      }
    }
  }
}

}  // namespace hz::stats
