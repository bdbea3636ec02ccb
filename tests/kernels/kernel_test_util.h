// Shared helpers for the kernel tests: random rows, quantized weight/activation buffers, tolerances.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/vnni_dispatch.h"

namespace hz::kernels::test {

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// `num_rows` rows of `n` random values stored as `type` (quantized with the reference quantizers).
inline std::vector<uint8_t> make_weights(DType type, int64_t num_rows, int64_t n, uint32_t seed) {
  const uint64_t rb = row_bytes(type, n);
  std::vector<uint8_t> w(rb * num_rows);
  for (int64_t r = 0; r < num_rows; ++r) {
    auto f = random_floats(n, seed + static_cast<uint32_t>(r) * 7919u);
    uint8_t* dst = w.data() + r * rb;
    switch (type) {
      case DType::kF32:
        std::memcpy(dst, f.data(), n * 4);
        break;
      case DType::kF16:
        ref::f32_to_f16_row(f.data(), reinterpret_cast<uint16_t*>(dst), n);
        break;
      case DType::kBF16:
        ref::f32_to_bf16_row(f.data(), reinterpret_cast<uint16_t*>(dst), n);
        break;
      case DType::kQ8_0:
        ref::quantize_row_q8_0(f.data(), reinterpret_cast<BlockQ8_0*>(dst), n);
        break;
      case DType::kQ4_0:
        ref::quantize_row_q4_0(f.data(), reinterpret_cast<BlockQ4_0*>(dst), n);
        break;
      default: {
        // k-quants: random bytes are valid blocks; keep the f16 scales small and finite.
        std::mt19937 rng(seed + static_cast<uint32_t>(r));
        for (uint64_t i = 0; i < rb; ++i) dst[i] = static_cast<uint8_t>(rng());
        const auto& tr = traits(type);
        for (uint64_t b = 0; b < rb / tr.block_bytes; ++b) {
          uint8_t* blk = dst + b * tr.block_bytes;
          const uint16_t d = f32_to_f16(0.001f + 0.0001f * static_cast<float>(rng() % 100));
          const uint16_t dmin = f32_to_f16(0.0005f + 0.0001f * static_cast<float>(rng() % 50));
          if (type == DType::kQ6_K) {
            std::memcpy(blk + 208, &d, 2);
          } else {
            std::memcpy(blk, &d, 2);
            std::memcpy(blk + 2, &dmin, 2);
          }
        }
      }
    }
  }
  return w;
}

// `num_tokens` activation rows for `wtype` (reference quantizer), from random floats.
inline std::vector<uint8_t> make_activations(DType wtype, int64_t num_tokens, int64_t n, uint32_t seed) {
  const uint64_t rb = activation_row_bytes(wtype, n);
  std::vector<uint8_t> x(rb * num_tokens);
  for (int64_t t = 0; t < num_tokens; ++t) {
    auto f = random_floats(n, seed + static_cast<uint32_t>(t) * 104729u);
    uint8_t* dst = x.data() + t * rb;
    switch (activation_type(wtype)) {
      case DType::kQ8_0:
        ref::quantize_row_q8_0(f.data(), reinterpret_cast<BlockQ8_0*>(dst), n);
        break;
      case DType::kQ8_K:
        ref::quantize_row_q8_k(f.data(), reinterpret_cast<BlockQ8_K*>(dst), n);
        break;
      default:
        std::memcpy(dst, f.data(), n * 4);
    }
  }
  return x;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The same bits, or both NaN: when a NaN meets another NaN in an FMA, x86 keeps the one in the
// first source operand of the encoding the compiler chose (vfmadd132/213/231), so which NaN (and
// its sign) comes out is not fixed by the arithmetic.
inline bool same_bits_or_nan(float a, float b) { return float_bits(a) == float_bits(b) || (std::isnan(a) && std::isnan(b)); }

}  // namespace hz::kernels::test

// Skips a test of the AVX-512 kernel variants on a CPU without them.
#define HZ_SKIP_WITHOUT_AVX512() \
  if (!::hz::kernels::vnni_supported()) GTEST_SKIP() << "CPU lacks avx512f/bw/vl/vnni"
