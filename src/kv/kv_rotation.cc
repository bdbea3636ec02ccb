#include "kv/kv_rotation.h"

namespace hz {

KvRotation::KvRotation(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim, uint64_t seed)
    : num_kv_heads_(num_kv_heads), head_dim_(head_dim) {
  signs_.resize(static_cast<size_t>(num_layers) * 2 * num_kv_heads * head_dim);
  // splitmix64: a fixed, platform-independent stream (std:: distributions are not).
  uint64_t state = seed;
  auto next = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (size_t i = 0; i < signs_.size(); i += 64) {
    const uint64_t bits = next();
    for (size_t j = 0; j < 64 && i + j < signs_.size(); ++j) signs_[i + j] = (bits >> j) & 1 ? -1.0f : 1.0f;
  }
}

}  // namespace hz
