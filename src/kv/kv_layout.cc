#include "kv/kv_layout.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/check.h"

namespace hz {

uint64_t kv_scale_group(uint64_t head_dim) { return head_dim < 32 ? head_dim : 32; }

uint64_t kv_plane_bytes(const KvGeometry& g, KvType t, uint64_t block_tokens) {
  HZ_CHECK(block_tokens > 0);
  const uint64_t rows = g.num_heads * block_tokens;  // head rows in one plane
  switch (t) {
    case KvType::kF32: return rows * g.head_dim * 4;
    case KvType::kF16: case KvType::kBF16: return rows * g.head_dim * 2;
    case KvType::kFp8: return rows * g.head_dim + (g.fp8_row_scales ? rows : g.num_heads) * 4;
    case KvType::kInt8: case KvType::kInt4: {
      uint64_t group = kv_scale_group(g.head_dim);
      uint64_t groups = group == 0 ? 0 : (g.head_dim + group - 1) / group;
      uint64_t row_elem_bytes = t == KvType::kInt8 ? g.head_dim : (g.head_dim + 1) / 2;
      return rows * (row_elem_bytes + groups * 2);
    }
    case KvType::kInt8c: case KvType::kInt4c: case KvType::kInt3: case KvType::kInt2: {
      const uint64_t bits = static_cast<uint64_t>(kv_type_element_bits(t));
      const uint64_t row_elem_bytes = (bits * g.head_dim + 7) / 8;
      return rows * row_elem_bytes + 2 * g.num_heads * g.head_dim;  // + a scale and an offset byte per channel
    }
  }
  return 0;
}

uint64_t kv_block_bytes(const KvGeometry& g, KvType t, uint64_t block_tokens) {
  return g.num_layers * g.num_streams * kv_plane_bytes(g, t, block_tokens);
}

double kv_bytes_per_token(const KvGeometry& g, KvType t, uint64_t block_tokens) {
  return static_cast<double>(kv_block_bytes(g, t, block_tokens)) / static_cast<double>(block_tokens);
}

uint64_t kv_bytes_for_tokens(const KvGeometry& g, KvType t, uint64_t block_tokens, uint64_t num_tokens) {
  uint64_t blocks = (num_tokens + block_tokens - 1) / block_tokens;
  return blocks * kv_block_bytes(g, t, block_tokens);
}

std::string kv_type_pair_name(KvTypePair t) {
  if (t.same()) return kv_type_name(t.k);
  return fmt::format("K {} / V {}", kv_type_name(t.k), kv_type_name(t.v));
}

uint8_t kv_type_pair_code(KvTypePair t) {
  static_assert(kNumKvTypes <= 15, "16 + 16 * k + v must fit in a byte");
  if (t.same()) return static_cast<uint8_t>(t.k);
  return static_cast<uint8_t>(16 + 16 * static_cast<unsigned>(t.k) + static_cast<unsigned>(t.v));
}

std::optional<KvTypePair> kv_type_pair_from_code(uint8_t code) {
  if (code < kNumKvTypes) return KvTypePair{static_cast<KvType>(code), static_cast<KvType>(code)};
  if (code < 16) return std::nullopt;
  const unsigned k = (code - 16u) / 16u, v = (code - 16u) % 16u;
  if (k >= kNumKvTypes || v >= kNumKvTypes || k == v) return std::nullopt;
  return KvTypePair{static_cast<KvType>(k), static_cast<KvType>(v)};
}

uint64_t kv_block_bytes(const KvGeometry& g, KvTypePair t, uint64_t block_tokens) {
  const uint64_t k = kv_plane_bytes(g, t.k, block_tokens);
  const uint64_t v = g.num_streams > 1 ? (g.num_streams - 1) * kv_plane_bytes(g, t.v, block_tokens) : 0;
  return g.num_layers * (k + v);
}

uint64_t kv_bytes_for_tokens(const KvGeometry& g, KvTypePair t, uint64_t block_tokens, uint64_t num_tokens) {
  const uint64_t blocks = (num_tokens + block_tokens - 1) / block_tokens;
  return blocks * kv_block_bytes(g, t, block_tokens);
}

uint64_t kv_sink_blocks(const KvPrecision& p, uint64_t block_tokens) {
  if (!p.mixed()) return 0;
  return (p.sink_tokens + block_tokens - 1) / block_tokens;
}

uint64_t kv_bytes_for_tokens(const KvGeometry& g, const KvPrecision& p, uint64_t block_tokens, uint64_t num_tokens) {
  const KvTypePair hot = p.hot_types();
  if (!p.mixed() || num_tokens <= p.hot_window) return kv_bytes_for_tokens(g, hot, block_tokens, num_tokens);
  // Sink blocks outside the window are hot too.
  const uint64_t rest = num_tokens - p.hot_window;
  const uint64_t sinks = std::min(rest, kv_sink_blocks(p, block_tokens) * block_tokens);
  return kv_bytes_for_tokens(g, hot, block_tokens, p.hot_window) + kv_bytes_for_tokens(g, hot, block_tokens, sinks) +
         kv_bytes_for_tokens(g, p.cold_types(), block_tokens, rest - sinks);
}

KvType kv_staging_type(const KvPrecision& p) {
  const KvTypePair h = p.hot_types();
  return h.k == KvType::kF32 || h.v == KvType::kF32 ? KvType::kF32 : KvType::kF16;
}

KvPrecision kv_canonical(KvPrecision p) {
  if (!p.mixed()) {
    p.hot_window = 0;
    p.cold = p.hot;
    p.cold_v = p.hot_v;
    p.sink_tokens = 0;  // every block is in the one type already
  }
  if (p.hot_v == p.hot) p.hot_v.reset();
  if (p.cold_v == p.cold) p.cold_v.reset();
  if (p.rotated_v == p.rotated) p.rotated_v.reset();
  return p;
}

std::string kv_precision_name(const KvPrecision& precision) {
  // The name is part of the KV fingerprint (disk and remote tiers, prefix-cache identity): rotated
  // KV must never be served to an engine that does not rotate, and the other way round; nor keys
  // of one type to an engine that stores them in another.
  const KvPrecision p = kv_canonical(precision);
  const bool rk = p.rotated_stream(0), rv = p.rotated_stream(1);
  const char* rot = rk && rv ? " rotated" : rk ? " (K rotated)" : rv ? " (V rotated)" : "";
  const std::string hot = kv_type_pair_name(p.hot_types());
  if (!p.mixed()) return fmt::format("{}{}", hot, rot);
  const std::string cold = kv_type_pair_name(p.cold_types());
  // Sinks change what is stored (their blocks keep the hot form): part of the name, so of the fingerprint.
  if (p.sink_tokens > 0) return fmt::format("{} (hot {}, sinks {}) + {}{}", hot, p.hot_window, p.sink_tokens, cold, rot);
  return fmt::format("{} (hot {}) + {}{}", hot, p.hot_window, cold, rot);
}

}  // namespace hz
