#include "runtime/embedding.h"

#include <fmt/format.h>

#include <cmath>

namespace hz {

std::vector<float> pool_and_normalize(const float* hidden, int64_t num_rows, int64_t width) {
  std::vector<double> sum(static_cast<size_t>(width), 0.0);
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int64_t i = 0; i < width; ++i) sum[i] += hidden[r * width + i];
  }
  double norm = 0;
  for (double& v : sum) {
    v /= static_cast<double>(num_rows);
    norm += v * v;
  }
  norm = std::sqrt(norm);
  std::vector<float> out(static_cast<size_t>(width));
  for (int64_t i = 0; i < width; ++i) out[i] = static_cast<float>(norm > 0 ? sum[i] / norm : 0.0);
  return out;
}

Result<std::vector<float>> compute_embedding(Model& model, KvManager& kvm, KvCache& kv, ThreadPool& pool,
                                             const std::vector<int32_t>& tokens, Pooling pooling,
                                             std::vector<float>* hidden) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return invalid_argument("an embedding input has no tokens");
  KvSeq seq;
  seq.tokens = tokens;
  if (!kvm.allocate(seq, n)) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("the KV cache has no room for an embedding input of {} tokens now (running requests hold it)", n));
  }
  SeqSlice slice;
  slice.tokens = seq.tokens.data();
  slice.num_tokens = static_cast<int32_t>(n);
  slice.start_pos = 0;
  slice.block_table = seq.block_table.data();
  slice.all_logits = pooling == Pooling::kMean;  // mean pools every row; last needs only the last
  model.forward({slice}, kv, pool, /*logits=*/nullptr, hidden);
  kvm.free(seq);
  const int64_t width = model.config().hidden;
  const int64_t rows = static_cast<int64_t>(hidden->size()) / width;
  return pool_and_normalize(hidden->data(), rows, width);
}

}  // namespace hz
