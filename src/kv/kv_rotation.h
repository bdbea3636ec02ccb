// KvRotation: the fixed signs of the randomized Hadamard rotation (kernels/hadamard.h) that a
// rotated KV cache (KvPrecision::rotated) applies to its rows, one sign vector per (layer, stream
// K / V, KV head), derived from a seed. Whoever writes K/V rows or reads them back (the model's
// attention, a device backend) takes the signs from here, so every block of a sequence is rotated
// alike and one attention accumulator serves all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hz {

class KvRotation {
 public:
  // The seed is part of the stored KV's meaning: changing it changes kv_rotation_version().
  static constexpr uint64_t kSeed = 0x6b76726f74617465ull;  // "kvrotate"

  KvRotation() = default;
  KvRotation(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim, uint64_t seed = kSeed);

  bool empty() const { return signs_.empty(); }
  int32_t head_dim() const { return head_dim_; }
  // head_dim signs (+1 / -1) of (layer, stream 0 = K / 1 = V, KV head).
  const float* signs(int32_t layer, int32_t stream, int32_t head) const {
    return signs_.data() + ((static_cast<size_t>(layer) * 2 + stream) * num_kv_heads_ + head) * head_dim_;
  }

 private:
  int32_t num_kv_heads_ = 0, head_dim_ = 0;
  std::vector<float> signs_;  // [num_layers][2][num_kv_heads][head_dim]
};

}  // namespace hz
