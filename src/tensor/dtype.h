// Element types of weights, activations and KV: GGUF type ids and their block traits.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace hz {

// Values are GGUF's ggml_type ids, so a tensor's type field maps directly.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct DTypeTraits {
  DType dtype;
  const char* name;        // as GGUF tools print it: "f32", "q4_0", "q4_K"
  uint32_t block_elems;    // elements per block (1 for plain types)
  uint32_t block_bytes;    // bytes per block
  bool supported;          // the engine has kernels for it (others are listed, not run)
};

// Traits for a GGUF type id, or nullopt for an id this build does not know.
std::optional<DTypeTraits> dtype_traits(uint32_t gguf_type_id);
const DTypeTraits& traits(DType t);
const char* dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of one row of `num_elems` elements; num_elems must be a multiple of block_elems.
inline uint64_t row_bytes(DType t, uint64_t num_elems) {
  const auto& tr = traits(t);
  return num_elems / tr.block_elems * tr.block_bytes;
}

// Block layouts of GGUF's quantized types (bit-compatible with files written by llama.cpp).
constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  uint16_t d;       // f16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

constexpr int kQK4_0 = 32;
struct BlockQ4_0 {
  uint16_t d;             // f16 scale
  uint8_t qs[kQK4_0 / 2];  // low nibbles: elements 0..15, high nibbles: 16..31; value = (q - 8) * d
};
static_assert(sizeof(BlockQ4_0) == 18);

constexpr int kQK_K = 256;
constexpr int kKScaleBytes = 12;
struct BlockQ4_K {
  uint16_t d;                 // f16 super-block scale for the 6-bit scales
  uint16_t dmin;              // f16 super-block scale for the 6-bit mins
  uint8_t scales[kKScaleBytes];  // 8 (scale, min) pairs, 6 bits each, packed
  uint8_t qs[kQK_K / 2];      // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];  // 5th bit of each quant
  uint8_t qs[kQK_K / 2];  // low 4 bits
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit scales of 16 sub-blocks
  uint16_t d;                 // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

// Activations quantized for k-quant dot products.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of qs in groups of 16
};
static_assert(sizeof(BlockQ8_K) == 292);

// ---- scalar f16 / bf16 conversions (IEEE binary16 with round-to-nearest-even) ----

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t bits_from_f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_from_f32(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace hz
