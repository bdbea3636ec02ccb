// Golden files in shared/testdata/golden: llama.cpp's outputs on the shared models.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hz::test {

struct GoldenCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::vector<std::vector<std::pair<int32_t, float>>> top5;  // per step: (id, probability)
  std::vector<float> prompt_last_logits;                     // random-weight models only
};

struct GoldenFile {
  std::string model;
  int n_predict = 0;
  std::vector<GoldenCase> cases;
};

GoldenFile load_golden(const std::string& name);  // e.g. "stories260K.json"

// Softmax probabilities of a logits row.
std::vector<float> softmax_probs(const float* logits, int n);
int32_t argmax(const float* logits, int n);

}  // namespace hz::test
