// Scalar operations of the CUDA kernels whose lane arithmetic is compiled for the host too
// (matmul_lanes.h, attention_lanes.h): the intrinsic on the GPU, on the host scalar code with the
// same result — __dp4a, __vsub4 and the f16 conversion are exact; __fmaf_rn / __fadd_rn /
// __fmul_rn / __fsub_rn are single IEEE operations, as std::fma and float +, * and - are here. The
// one exception is exp_f: expf on the GPU is within 2 ulp, std::exp on the host, so a host run
// equals the host emulation (kernels/cuda/host_reference.h), not the GPU, in its last bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/kv_codec.h"
#include "tensor/dtype.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_common.cuh"
#define HZ_LANE_FN __host__ __device__ __forceinline__
#else
#define HZ_LANE_FN inline
#endif

namespace hz::cuda::lanes {

HZ_LANE_FN int dp4a(int a, int b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i) c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  return c;
#endif
}

// Bytewise a - b, modulo 256.
HZ_LANE_FN uint32_t vsub4(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __vsub4(a, b);
#else
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= ((((a >> (8 * i)) & 0xffu) - ((b >> (8 * i)) & 0xffu)) & 0xffu) << (8 * i);
  return r;
#endif
}

HZ_LANE_FN float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}

HZ_LANE_FN float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

HZ_LANE_FN float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// f16 bits -> f32 (exact; the hardware conversion on the GPU).
HZ_LANE_FN float half_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return hz::f16_to_f32(h);
#endif
}

HZ_LANE_FN uint16_t load_u16(const uint8_t* p) {  // p 2-byte aligned
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

// The same at any address (a scale in an arena plane whose size is odd): byte by byte.
HZ_LANE_FN uint16_t load_u16_any(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}

// The little-endian 32-bit word at p (2-byte aligned): two 2-byte loads.
HZ_LANE_FN int load_word_b2(const uint8_t* p) {
  return static_cast<int>(static_cast<uint32_t>(load_u16(p)) | (static_cast<uint32_t>(load_u16(p + 2)) << 16));
}

// 16 bytes at p (16-byte aligned) into dst.
HZ_LANE_FN void load16(const void* p, void* dst) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(p);
#else
  std::memcpy(dst, p, 16);
#endif
}

HZ_LANE_FN float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

HZ_LANE_FN float exp_f(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}

HZ_LANE_FN float fmax_f(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}

HZ_LANE_FN float load_f32(const uint8_t* p) {  // p 4-byte aligned on the GPU
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const float*>(p);
#else
  float v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

// An f32 at any address: byte by byte (the little-endian bits).
HZ_LANE_FN float load_f32_any(const uint8_t* p) {
  const uint32_t bits = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                        (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
#endif
}

HZ_LANE_FN float bf16_bits_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return detail::bf16_to_f32(h);
#else
  return hz::bf16_to_f32(h);
#endif
}

// OCP E4M3 -> f32 (exact): the device's detail::e4m3_to_f32, the host's kernels::e4m3_to_f32.
HZ_LANE_FN float e4m3_to_f32(uint8_t v) {
#if defined(__CUDA_ARCH__)
  return detail::e4m3_to_f32(v);
#else
  return kernels::e4m3_to_f32(v);
#endif
}

}  // namespace hz::cuda::lanes
