#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hz::bench {

nlohmann::json Summary::to_json() const {
  return {{"median", median}, {"min", min}, {"max", max}, {"mean", mean}};
}

static double sorted_percentile(const std::vector<double>& s, double p) {
  if (s.empty()) return 0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (rank - static_cast<double>(lo));
}

Summary summarize(std::vector<double> samples) {
  Summary r;
  if (samples.empty()) return r;
  std::sort(samples.begin(), samples.end());
  r.count = static_cast<int64_t>(samples.size());
  r.min = samples.front();
  r.max = samples.back();
  r.median = sorted_percentile(samples, 50);
  r.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  return r;
}

double percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  return sorted_percentile(samples, p);
}

}  // namespace hz::bench
