// Bytes of the paged KV cache per block and per token for each KV element type. The single source
// of truth for KV sizes: the planner plans with these figures and the KV pool allocates with them.
//
// Layout (one block = `block_tokens` positions of every layer; kv/kv_cache.h allocates it):
//   storage [num_blocks][num_layers][stream][...], stream = K, V (GQA) or the one latent (MLA).
//   One stream of one layer in one block = a "plane" (K's and V's may be of different types, so
//   of different sizes: KvTypePair; V's plane starts where K's ends):
//     elements: [num_heads][block_tokens][head_dim], codec = the stream's KV type
//     then scales (quantized types only), right after the elements of that plane:
//   f32 / f16 / bf16: 4 / 2 / 2 bytes per element, no scales.
//   fp8 (E4M3): 1 byte per element + one f32 scale per (plane, head): [num_heads] f32 (the device
//         arena: one per head row, [num_heads][block_tokens] f32; KvGeometry::fp8_row_scales).
//   int8: 1 byte per element + one f16 scale per group of G = min(32, head_dim) elements of a head
//         row (a row's last group may be shorter when head_dim % 32 != 0): [num_heads][block_tokens][groups] f16.
//   int4: 4 bits per element (two per byte, a row padded to whole bytes) + the same f16 group scales
//         as int8. Symmetric like Q4_0: value = (q - 8) * scale.
//   int8c / int4c / int3 / int2 (int3 and int2 cold only: under a hot window): 8 / 4 / 3 / 2 bits
//         per element, packed LSB first per head row (rows padded to whole bytes), + per channel of
//         each head over the block's rows a scale byte and an offset byte: [num_heads][2][head_dim]
//         u8 (kernels/kv_codec.h): asymmetric, value = (q + z * u) * scale, q in [0, 2^bits - 1].
//         Bits per value, scales included: bits + 16 / block_tokens (9, 5, 4 and 3 with 16-token
//         blocks, against int8's / int4's 8 / 4 + 16 / min(32, head_dim): 10 / 6 at head dim 8,
//         8.5 / 4.5 at 32 or more).
//   MLA (DeepSeek-V2/V3, Kimi K2): one stream holding the compressed latent of dimension
//   kv_lora_rank + qk_rope_head_dim per position, as a single "head" (num_heads = 1).
// A sequence of n tokens holds ceil(n / block_tokens) blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/kv_type.h"

namespace hz {

// What the KV cache stores per layer, independent of where the shape came from.
struct KvGeometry {
  uint64_t num_layers = 0;
  uint64_t num_streams = 2;   // 2 (K and V) for GQA/MHA, 1 for MLA
  uint64_t num_heads = 0;     // KV heads per stream (1 for MLA)
  uint64_t head_dim = 0;      // elements per head row (kv_lora_rank + qk_rope_head_dim for MLA)
  // The device arena's layout (kv/device_kv_arena.h): fp8 takes one f32 scale per head row
  // ([num_heads][block_tokens] f32) instead of one per head, since the device encodes each row
  // as it is written. Every other type is laid out as on the CPU.
  bool fp8_row_scales = false;
};

// Group length of the int8/int4 scales for a head row of `head_dim` elements.
uint64_t kv_scale_group(uint64_t head_dim);
// Bytes of one plane (one stream of one layer in one block), scales included.
uint64_t kv_plane_bytes(const KvGeometry& g, KvType t, uint64_t block_tokens);
// Bytes of one block across all layers and streams: what the pool allocates per block.
uint64_t kv_block_bytes(const KvGeometry& g, KvType t, uint64_t block_tokens);

// The element types of a block's two streams: K and V (GQA/MHA). MLA's one latent stream takes `k`.
struct KvTypePair {
  KvType k = KvType::kF16;
  KvType v = KvType::kF16;
  KvType operator[](int32_t stream) const { return stream == 0 ? k : v; }
  bool same() const { return k == v; }
  bool operator==(const KvTypePair&) const = default;
};
// "int8", or "K int8 / V int4" when the streams differ.
std::string kv_type_pair_name(KvTypePair t);
// One byte for the record headers of the KV stores: the KvType when both streams share it, else
// 16 + 16 * k + v (never a single type's value).
uint8_t kv_type_pair_code(KvTypePair t);
std::optional<KvTypePair> kv_type_pair_from_code(uint8_t code);  // nullopt: not a code of kv_type_pair_code
// Bytes of one block with K planes in t.k and V planes in t.v (MLA: t.k only).
uint64_t kv_block_bytes(const KvGeometry& g, KvTypePair t, uint64_t block_tokens);
uint64_t kv_bytes_for_tokens(const KvGeometry& g, KvTypePair t, uint64_t block_tokens, uint64_t num_tokens);
// Bytes per token: kv_block_bytes / block_tokens (exact; fractional when scales are per block).
double kv_bytes_per_token(const KvGeometry& g, KvType t, uint64_t block_tokens);
// Bytes for a sequence of `num_tokens` positions: whole blocks.
uint64_t kv_bytes_for_tokens(const KvGeometry& g, KvType t, uint64_t block_tokens, uint64_t num_tokens);

// Mixed precision by distance: the newest `hot_window` tokens at `hot`, older ones at `cold`
// (hot_window 0: everything at `hot`). Each part is counted in whole blocks. `rotated`: K and V
// rows are stored rotated by a fixed randomized Hadamard transform per layer, stream and head
// (kv/kv_rotation.h), in every block; the model rotates queries alike and attention outputs back.
// `sink_tokens` (only with a hot window): the blocks holding positions [0, sink_tokens) stay in the
// hot type for every query, however old (attention sinks: the first tokens draw outsized
// attention); whole blocks, so a block of 16 tokens keeps positions 0-15 for any value 1-16.
// Keys and values may take different types (`hot_v`, `cold_v`; unset: the keys' type) and only one
// of them may be rotated (`rotated_v`; unset: as the keys): `hot`, `cold` and `rotated` are the
// keys' (and, unless overridden, the values') settings. MLA's one stream follows the keys'.
struct KvPrecision {
  KvType hot = KvType::kF16;
  uint64_t hot_window = 0;
  KvType cold = KvType::kF16;
  bool rotated = false;
  uint64_t sink_tokens = 0;
  std::optional<KvType> hot_v;
  std::optional<KvType> cold_v;
  std::optional<bool> rotated_v;

  KvTypePair hot_types() const { return {hot, hot_v.value_or(hot)}; }
  KvTypePair cold_types() const { return {cold, cold_v.value_or(cold)}; }
  bool rotated_stream(int32_t stream) const { return stream == 0 ? rotated : rotated_v.value_or(rotated); }
  bool any_rotated() const { return rotated_stream(0) || rotated_stream(1); }
  // Whether anything is stored in a type other than the hot one (a window whose types differ).
  bool mixed() const { return hot_window > 0 && hot_types() != cold_types(); }
  // The types of what the arena holds: the cold types with a window, else the hot ones.
  KvTypePair arena_types() const { return mixed() ? cold_types() : hot_types(); }
};
// Blocks kept in the hot type as sinks: ceil(sink_tokens / block_tokens) with a hot window, else 0.
uint64_t kv_sink_blocks(const KvPrecision& p, uint64_t block_tokens);
uint64_t kv_bytes_for_tokens(const KvGeometry& g, const KvPrecision& p, uint64_t block_tokens, uint64_t num_tokens);
// "f16", "f16 (hot 4096) + int4", "int4 rotated", "f16 (hot 32, sinks 4) + int2 rotated",
// "f16 (hot 32) + K int3 / V int2", "K int4c / V int4 (V rotated)". Keys every tier's fingerprint.
std::string kv_precision_name(const KvPrecision& p);
// Type of the staging copies (written rows, exact reads): f32 when a hot type is f32, else f16.
KvType kv_staging_type(const KvPrecision& p);
// The same precision with its redundant parts dropped: a window whose hot and cold types match (and
// its sinks), V settings equal to the keys'. Names and comparisons see the canonical form.
KvPrecision kv_canonical(KvPrecision p);

}  // namespace hz
