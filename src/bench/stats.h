// Summary statistics of benchmark samples: median/min/max/mean of repetitions and the
// percentiles of latency distributions.
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

namespace hz::bench {

struct Summary {
  double median = 0, min = 0, max = 0, mean = 0;
  int64_t count = 0;
  nlohmann::json to_json() const;  // {"median", "min", "max", "mean"}
};

// All zeros for no samples.
Summary summarize(std::vector<double> samples);

// Linear interpolation between closest ranks (numpy's default); p in [0, 100]. 0 for no samples.
double percentile(std::vector<double> samples, double p);

}  // namespace hz::bench
