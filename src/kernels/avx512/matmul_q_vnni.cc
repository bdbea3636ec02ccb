// AVX-512 VNNI kinds of the Q4_0/Q8_0 8-row group matmul (driver: avx2/matmul_q_groups.h). The only
// TU compiled with -mavx512f/bw/vl/vnni; reached only through dispatch after a CPU check.
// vpdpbusd multiplies unsigned bytes by signed bytes and adds each 4 products into an int32 lane
// with no int16 intermediate, so one instruction replaces maddubs + madd (+ the sign trick for
// Q8_0). Block dots stay exact int32, so every output is bit-identical to the AVX2 kernel and the
// scalar reference (same fma per block, in block order).
#include <immintrin.h>

#include "base/check.h"
#include "kernels/avx2/matmul_kq_groups.h"
#include "kernels/avx2/matmul_q_groups.h"
#include "kernels/avx512/vnni_kernels.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "matmul_q_vnni.cc needs -mavx512vl -mavx512vnni (see the top-level CMakeLists.txt)"
#endif

namespace hz::kernels::avx2 {
namespace {

// xq + 4k as a dword broadcast to all 8 lanes (folds into the EVEX {1to8} memory operand).
inline __m256i bcast(const uint8_t* xq, int k) { return _mm256_set1_epi32(load_i32(xq + 4 * k)); }

// 8 dot-product steps over the dword pairs (v[k], x dword k), on two chains to hide the latency;
// `init` seeds the first chain with the kind's correction. Integer adds: the order is immaterial.
inline __m256i dot8(const __m256i v[8], const uint8_t* xq, __m256i init) {
  __m256i s0 = _mm256_dpbusd_epi32(init, v[0], bcast(xq, 0));
  __m256i s1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), v[1], bcast(xq, 1));
  for (int k = 2; k < 8; k += 2) {
    s0 = _mm256_dpbusd_epi32(s0, v[k], bcast(xq, k));
    s1 = _mm256_dpbusd_epi32(s1, v[k + 1], bcast(xq, k + 1));
  }
  return _mm256_add_epi32(s0, s1);
}

// ---- Q4_0: nibbles (0..15) are the unsigned operand; sum(w*x) = sum(nib*x) - 8*sum(x) ----
struct Q4_0VnniKind {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr bool kNeedsXSum = true;
  struct W {
    __m256i v[8];  // v[k] lane r = 4 nibbles of row r, elements 4k..4k+3 (decode_q4_0_rows)
    __m256 d;
  };
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { decode_q4_0_rows(rows, b, w->v, &w->d); }
  static void decode_packed(const uint8_t* p, W* w) { decode_q4_0_packed(p, w->v, &w->d); }
  static __m256i dot(const W& w, const uint8_t* xq, int32_t xsum8) {
    return dot8(w.v, xq, _mm256_set1_epi32(-xsum8));
  }
};

// ---- Q8_0: w + 128 (0..255, i.e. w xor 0x80) is the unsigned operand ----
// sum((w+128)*x) = sum(w*x) + 128*sum(x) = sum(w*x) + 16*xsum8. Each lane's 4 products stay below
// 255*128*4 in magnitude: exact in int32, and unlike the sign trick exact even for x = -128.
struct Q8_0VnniKind {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr bool kNeedsXSum = true;
  struct W {
    __m256i u[8];  // u[k] lane r = row r's quants 4k..4k+3, each + 128
    __m256 d;
  };
  static void bias(W* w) {
    const __m256i m = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k) w->u[k] = _mm256_xor_si256(w->u[k], m);
  }
  static void decode(const uint8_t* const* rows, int64_t b, W* w) {
    decode_q8_0_rows(rows, b, w->u, &w->d);
    bias(w);
  }
  static void decode_packed(const uint8_t* p, W* w) {
    decode_q8_0_packed(p, w->u, &w->d);
    bias(w);
  }
  static __m256i dot(const W& w, const uint8_t* xq, int32_t xsum8) {
    return dot8(w.u, xq, _mm256_set1_epi32(-16 * xsum8));
  }
};

// The k-quant group kernels' dot: vpdpbusd (exact int32, the same sums as the AVX2 maddubs pair).
struct VnniDot {
  static __m256i dot4(__m256i acc, __m256i v, __m256i x) { return _mm256_dpbusd_epi32(acc, v, x); }
};

}  // namespace
}  // namespace hz::kernels::avx2

namespace hz::kernels::vnni {

void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(n % kQK_K == 0);
  switch (wtype) {
    case DType::kQ4_K:
      return avx2::kq::matmul_groups<avx2::kq::Q4KKind, avx2::VnniDot>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes,
                                                                      num_tokens, y, y_stride);
    case DType::kQ6_K:
      return avx2::kq::matmul_groups<avx2::kq::Q6KKind, avx2::VnniDot>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes,
                                                                      num_tokens, y, y_stride);
    default:
      HZ_CHECK_MSG(false, "vnni::matmul_kquant: Q4_K or Q6_K only");
  }
}

void matmul_q4_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(n % kQK4_0 == 0);
  avx2::matmul_rows<avx2::Q4_0VnniKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

void matmul_q8_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(n % kQK8_0 == 0);
  avx2::matmul_rows<avx2::Q8_0VnniKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(row_begin % avx2::kGroup == 0 && n % kQK8_0 == 0);
  if (row_end <= row_begin || num_tokens <= 0) return;
  const uint64_t group_bytes = packed_group_bytes(wtype, n);
  switch (wtype) {
    case DType::kQ4_0:
      return avx2::matmul_packed_kind<avx2::Q4_0VnniKind>(n, packed, row_begin, row_end, x, num_tokens, y, y_stride,
                                                          group_bytes);
    case DType::kQ8_0:
      return avx2::matmul_packed_kind<avx2::Q8_0VnniKind>(n, packed, row_begin, row_end, x, num_tokens, y, y_stride,
                                                          group_bytes);
    default:
      HZ_CHECK_MSG(false, "vnni::matmul_packed: unsupported weight dtype");
  }
}

}  // namespace hz::kernels::vnni
