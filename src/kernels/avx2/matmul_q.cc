// AVX2 vec_dot and matmul for Q4_0 and Q8_0 weights against Q8_0 activations: the AVX2 "kinds" of
// the 8-row group driver in matmul_q_groups.h (shared with avx512/matmul_q_vnni.cc). matmul works
// on groups of 8 weight rows whose blocks are transposed in registers so that lane r of every vector
// belongs to row r: one block of one token then costs a handful of integer ops for all 8 rows, the
// weights of a block are decoded once for every token of the call, and no horizontal sum is needed.
// Arithmetic per output element (the contract shared with vec_dot and the scalar reference):
// isum_b = exact int32 dot of block b, acc = fma(d_w * d_x, float(isum_b), acc) in block order
// from 0; which rows or tokens share a call never changes an element.
#include <cmath>
#include <cstddef>
#include <vector>

#include "base/check.h"
#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/matmul_q_groups.h"

namespace hz::kernels::avx2 {

int32_t* block_sum_scratch(size_t count) {
  // Per-thread scratch, grown once: no allocation per call once warm.
  thread_local std::vector<int32_t> buf;
  if (buf.size() < count) buf.resize(count);
  return buf.data();
}

namespace {

// ---- Q4_0: weights as unsigned nibbles (0..15); sum(w*x) = sum(nib*x) - 8*sum(x) ----
// maddubs(nib, x) pair sums are <= 2*15*128 = 3840, so 8 of them add up in int16 exactly.
struct Q4_0Kind {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr bool kNeedsXSum = true;
  // Decoded block of 8 rows (see decode_q4_0_rows): v[k] lane r = 4 nibbles of row r.
  struct W {
    __m256i v[8];
    __m256 d;
  };
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { decode_q4_0_rows(rows, b, w->v, &w->d); }
  static void decode_packed(const uint8_t* p, W* w) { decode_q4_0_packed(p, w->v, &w->d); }
  // Exact int32 block dots of the 8 rows with one activation block (xsum8 = 8 * sum of its quants).
  static __m256i dot(const W& w, const uint8_t* xq, int32_t xsum8) {
    __m256i s = _mm256_maddubs_epi16(w.v[0], _mm256_set1_epi32(load_i32(xq)));
    for (int k = 1; k < 4; ++k) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w.v[k], _mm256_set1_epi32(load_i32(xq + 4 * k))));
    for (int k = 0; k < 4; ++k) {
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w.v[4 + k], _mm256_set1_epi32(load_i32(xq + 16 + 4 * k))));
    }
    return _mm256_sub_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)), _mm256_set1_epi32(xsum8));
  }
  // One row's block b, exact.
  static int32_t dot_row(const uint8_t* row, int64_t b, const uint8_t* xq) {
    const uint8_t* qs = row + b * static_cast<int64_t>(kBlockBytes) + 2;
    const __m128i bytes = load128(qs);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0f));
    const __m256i q = _mm256_sub_epi8(nib, _mm256_set1_epi8(8));
    const __m256i x = load256(xq);
    // sign(x, q) * |q| = x * q; |q| <= 8 keeps the int16 pair sums exact.
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q));
    return hsum_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  }
};

// ---- Q8_0: signed weights; sign(x, w) * |w| = x * w per byte ----
// |w| <= 128 (as unsigned) and |x| <= 127 (the activation quantizer never writes -128) keep the
// int16 pair sums of maddubs exact (<= 32512); each is widened to int32 before the next is added.
struct Q8_0Kind {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr bool kNeedsXSum = false;
  // v[k] lane r = row r, elements 4k..4k+3 (k = 0..7); a[k] = |v[k]| bytewise.
  struct W {
    __m256i v[8];
    __m256i a[8];
    __m256 d;
  };
  static void decode(const uint8_t* const* rows, int64_t b, W* w) {
    decode_q8_0_rows(rows, b, w->v, &w->d);
    for (int k = 0; k < 8; ++k) w->a[k] = _mm256_sign_epi8(w->v[k], w->v[k]);
  }
  static void decode_packed(const uint8_t* p, W* w) {
    decode_q8_0_packed(p, w->v, &w->d);
    for (int k = 0; k < 8; ++k) w->a[k] = _mm256_sign_epi8(w->v[k], w->v[k]);
  }
  static __m256i dot(const W& w, const uint8_t* xq, int32_t) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i x = _mm256_set1_epi32(load_i32(xq + 4 * k));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w.a[k], _mm256_sign_epi8(x, w.v[k])), ones));
    }
    return acc;
  }
  static int32_t dot_row(const uint8_t* row, int64_t b, const uint8_t* xq) {
    const __m256i q = load256(row + b * static_cast<int64_t>(kBlockBytes) + 2);
    const __m256i x = load256(xq);
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q));
    return hsum_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  }
};

template <class K>
float dot_one(int64_t n, const uint8_t* row, const uint8_t* x) {
  float acc = 0.0f;
  const int64_t nb = n / kQK8_0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* xb = x + b * sizeof(BlockQ8_0);
    const int32_t isum = K::dot_row(row, b, xb + 2);
    const float d = load_f16_scalar(row + b * static_cast<int64_t>(K::kBlockBytes)) * load_f16_scalar(xb);
    acc = std::fma(d, static_cast<float>(isum), acc);
  }
  return acc;
}

}  // namespace

void vec_dot_q4_0(int64_t n, const void* w_row, const void* x_row, float* out) {
  *out = dot_one<Q4_0Kind>(n, static_cast<const uint8_t*>(w_row), static_cast<const uint8_t*>(x_row));
}
void vec_dot_q8_0(int64_t n, const void* w_row, const void* x_row, float* out) {
  *out = dot_one<Q8_0Kind>(n, static_cast<const uint8_t*>(w_row), static_cast<const uint8_t*>(x_row));
}

void matmul_q4_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  matmul_rows<Q4_0Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}
void matmul_q8_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  matmul_rows<Q8_0Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(row_begin % kGroup == 0 && n % kQK8_0 == 0);
  if (row_end <= row_begin || num_tokens <= 0) return;
  const uint64_t group_bytes = packed_group_bytes(wtype, n);
  switch (wtype) {
    case DType::kQ4_0:
      return matmul_packed_kind<Q4_0Kind>(n, packed, row_begin, row_end, x, num_tokens, y, y_stride, group_bytes);
    case DType::kQ8_0:
      return matmul_packed_kind<Q8_0Kind>(n, packed, row_begin, row_end, x, num_tokens, y, y_stride, group_bytes);
    default:
      HZ_CHECK_MSG(false, "matmul_packed: unsupported weight dtype");
  }
}

}  // namespace hz::kernels::avx2
