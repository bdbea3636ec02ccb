#include "support/golden.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "support/test_support.h"

namespace hz::test {

GoldenFile load_golden(const std::string& name) {
  std::ifstream in(testdata_path("golden/" + name));
  if (!in) throw std::runtime_error("cannot open golden file " + name);
  nlohmann::json j = nlohmann::json::parse(in);
  GoldenFile g;
  g.model = j.at("model").get<std::string>();
  g.n_predict = j.at("n_predict").get<int>();
  for (const auto& c : j.at("cases")) {
    GoldenCase gc;
    gc.prompt = c.at("prompt").get<std::string>();
    gc.prompt_ids = c.at("prompt_ids").get<std::vector<int32_t>>();
    gc.output_ids = c.at("output_ids").get<std::vector<int32_t>>();
    for (const auto& step : c.at("top5")) {
      std::vector<std::pair<int32_t, float>> s;
      for (const auto& e : step) s.emplace_back(e.at(0).get<int32_t>(), e.at(1).get<float>());
      gc.top5.push_back(std::move(s));
    }
    if (c.contains("prompt_last_logits")) gc.prompt_last_logits = c.at("prompt_last_logits").get<std::vector<float>>();
    g.cases.push_back(std::move(gc));
  }
  return g;
}

std::vector<float> softmax_probs(const float* logits, int n) {
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max<double>(mx, logits[i]);
  std::vector<float> p(n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(logits[i] - mx);
  for (int i = 0; i < n; ++i) p[i] = static_cast<float>(std::exp(logits[i] - mx) / sum);
  return p;
}

int32_t argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

}  // namespace hz::test
