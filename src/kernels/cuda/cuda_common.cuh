// Device-side helpers shared by the .cu files: conversions copied operation for operation from
// their scalar references (tensor/dtype.cc, kernels/ref/kv_codec.cc), so the results are
// bit-identical; launch checks. Only .cu files include this.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>



namespace hz::cuda::detail {



__device__ __forceinline__ float f32_from_bits(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ uint32_t bits_from_f32(float f) { return __float_as_uint(f); }

// hz::f16_to_f32 (tensor/dtype.cc), exact for every input including NaN payloads.
__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return f32_from_bits(bits);
}

// hz::f32_to_f16: round to nearest even, NaN -> sign | 0x7e00, overflow -> Inf.
__device__ __forceinline__ uint16_t f32_to_f16(float f) {
  uint32_t x = bits_from_f32(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    const float a = f32_from_bits(abs);
    const float scaled = __fmul_rn(a, 16777216.0f);  // exact
    uint32_t q = static_cast<uint32_t>(scaled);      // truncation, as the reference's cast
    const float rem = __fsub_rn(scaled, static_cast<float>(q));
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;
  return static_cast<uint16_t>(sign | (abs >> 13));
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_from_f32(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// kernels::f32_to_e4m3 / e4m3_to_f32 (OCP E4M3: bias 7, no infinities, saturating at 448).
__device__ __forceinline__ uint8_t f32_to_e4m3(float x) {
  const uint32_t u = bits_from_f32(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
  const float a = fabsf(x);
  if (isnan(x)) return 0x7f;
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) {
    const int q = static_cast<int>(rintf(__fmul_rn(a, 512.0f)));  // exact product, half to even
    return sign | static_cast<uint8_t>(q);
  }
  const uint32_t ua = bits_from_f32(a);
  int e = static_cast<int>(ua >> 23) - 127 + 7;
  uint32_t m = (ua >> 20) & 7;
  const uint32_t rem = ua & 0xfffff;
  if (rem > 0x80000 || (rem == 0x80000 && (m & 1))) ++m;
  if (m == 8) {
    m = 0;
    ++e;
  }
  if (e > 15 || (e == 15 && m == 7)) return sign | 0x7e;
  return sign | static_cast<uint8_t>(e << 3) | static_cast<uint8_t>(m);
}

__device__ __forceinline__ float e4m3_to_f32(uint8_t v) {
  const int e = (v >> 3) & 15;
  const int m = v & 7;
  float a;
  if (e == 15 && m == 7) {
    a = __int_as_float(0x7fc00000);
  } else if (e == 0) {
    a = __fmul_rn(static_cast<float>(m), 1.0f / 512.0f);
  } else {
    a = ldexpf(__fadd_rn(1.0f, __fdiv_rn(static_cast<float>(m), 8.0f)), e - 7);
  }
  return (v & 0x80) ? -a : a;
}

// Unaligned little-endian loads/stores of the byte layouts (blocks are 18/34 bytes long).
__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
__device__ __forceinline__ void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
__device__ __forceinline__ float load_f32(const uint8_t* p) {
  return __uint_as_float(static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24));
}
__device__ __forceinline__ void store_f32(uint8_t* p, float f) {
  const uint32_t u = __float_as_uint(f);
  p[0] = static_cast<uint8_t>(u);
  p[1] = static_cast<uint8_t>(u >> 8);
  p[2] = static_cast<uint8_t>(u >> 16);
  p[3] = static_cast<uint8_t>(u >> 24);
}

}  // namespace hz::cuda::detail
