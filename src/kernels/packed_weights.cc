// The packed (block-interleaved) weight layout of kernels.h: packing at load time and unpacking a
// row back. Pure byte moves, the same for every ISA.
#include <cstring>

#include "base/check.h"
#include "kernels/kernels.h"

namespace hz::kernels {
namespace {

constexpr int kGroup = 8;

// Bytes of quants per block and the offset of the quants inside a GGUF block (after the f16 scale).
uint64_t quant_bytes(DType wtype) { return wtype == DType::kQ4_0 ? kQK4_0 / 2 : kQK8_0; }
uint64_t block_bytes(DType wtype) { return wtype == DType::kQ4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0); }

}  // namespace

bool packable(DType wtype) { return wtype == DType::kQ4_0 || wtype == DType::kQ8_0; }

uint64_t packed_group_bytes(DType wtype, int64_t n) {
  HZ_CHECK(packable(wtype) && n % kQK8_0 == 0);
  return kGroup * block_bytes(wtype) * static_cast<uint64_t>(n / kQK8_0);
}

uint64_t packed_bytes(DType wtype, int64_t rows, int64_t n) {
  return packed_group_bytes(wtype, n) * static_cast<uint64_t>((rows + kGroup - 1) / kGroup);
}

void pack_weights(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t rows, void* out) {
  const auto* src = static_cast<const uint8_t*>(w);
  auto* dst = static_cast<uint8_t*>(out);
  const int64_t nb = n / kQK8_0;
  const uint64_t bb = block_bytes(wtype), qb = quant_bytes(wtype), gb = packed_group_bytes(wtype, n);
  for (int64_t g = 0; g * kGroup < rows; ++g) {
    for (int r = 0; r < kGroup; ++r) {
      const int64_t row = g * kGroup + r < rows ? g * kGroup + r : rows - 1;
      const uint8_t* in = src + row * w_row_bytes;
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* blk = dst + g * gb + b * kGroup * bb;
        std::memcpy(blk + 2 * r, in + b * bb, 2);
        for (uint64_t k = 0; k < qb / 4; ++k) std::memcpy(blk + 16 + 32 * k + 4 * r, in + b * bb + 2 + 4 * k, 4);
      }
    }
  }
}

void unpack_row(DType wtype, int64_t n, const void* packed, int64_t r, void* row) {
  const auto* src = static_cast<const uint8_t*>(packed);
  auto* out = static_cast<uint8_t*>(row);
  const int64_t nb = n / kQK8_0;
  const uint64_t bb = block_bytes(wtype), qb = quant_bytes(wtype), gb = packed_group_bytes(wtype, n);
  const uint8_t* group = src + (r / kGroup) * gb;
  const int lane = static_cast<int>(r % kGroup);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * kGroup * bb;
    std::memcpy(out + b * bb, blk + 2 * lane, 2);
    for (uint64_t k = 0; k < qb / 4; ++k) std::memcpy(out + b * bb + 2 + 4 * k, blk + 16 + 32 * k + 4 * lane, 4);
  }
}

uint64_t packed_activation_bytes(int64_t n, int64_t num_tokens) {
  const int64_t chunks = (num_tokens + kPackedTokenChunk - 1) / kPackedTokenChunk;
  return static_cast<uint64_t>(chunks * (n / kQK8_0) * kPackedTokenChunk * kPackedActivationEntryBytes);
}

void pack_activations(int64_t n, const BlockQ8_0* x, uint64_t x_row_bytes, int64_t num_tokens, void* out) {
  const int64_t nb = n / kQK8_0;
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const auto* row = reinterpret_cast<const BlockQ8_0*>(reinterpret_cast<const uint8_t*>(x) + t * x_row_bytes);
    const int64_t c = t / kPackedTokenChunk, j = t % kPackedTokenChunk;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* e = dst + ((c * nb + b) * kPackedTokenChunk + j) * kPackedActivationEntryBytes;
      const float d = f16_to_f32(row[b].d);
      int32_t sum = 0;
      for (int k = 0; k < kQK8_0; ++k) sum += row[b].qs[k];
      sum *= -8;
      std::memcpy(e, &d, 4);
      std::memcpy(e + 4, &sum, 4);
      std::memcpy(e + 8, row[b].qs, kQK8_0);
    }
  }
}

void unpack_activation_row(int64_t n, const void* packed, int64_t t, BlockQ8_0* row) {
  const int64_t nb = n / kQK8_0;
  const auto* src = static_cast<const uint8_t*>(packed);
  const int64_t c = t / kPackedTokenChunk, j = t % kPackedTokenChunk;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* e = src + ((c * nb + b) * kPackedTokenChunk + j) * kPackedActivationEntryBytes;
    float d;
    std::memcpy(&d, e, 4);
    row[b].d = f32_to_f16(d);  // exact: d came from an f16
    std::memcpy(row[b].qs, e + 8, kQK8_0);
  }
}

}  // namespace hz::kernels
