// AVX2 vec_dot and matmul for F32, F16, BF16 (f32 activations) and Q8_0, Q4_0 (Q8_0 activations).
// Every type is a "kind" for the tiled driver in matmul_tile.h, so matmul == vec_dot bit for bit.
#include <cstddef>

#include "base/check.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/matmul_tile.h"

namespace hz::kernels::avx2 {
namespace {

// ---- float weights: one step = 8 elements, one FMA per (row, token) ----
template <class Load>
struct FloatKind {
  static constexpr int kStep = 8;
  static constexpr bool kHasTail = true;
  static constexpr int kMaxRows = 4;
  static constexpr int kMaxTokens = 3;
  using W = __m256;
  using X = __m256;
  static W load_w(const uint8_t* row, int64_t s) { return Load::load(row, s * 8); }
  static W load_w_tail(const uint8_t* row, int64_t s, int64_t count) { return Load::load_partial(row, s * 8, count); }
  static X load_x(const uint8_t* row, int64_t s) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + s * 8); }
  static X load_x_tail(const uint8_t* row, int64_t s, int64_t count) {
    return load_f32_partial(reinterpret_cast<const float*>(row) + s * 8, count);
  }
  static __m256 fold(W w, X x, __m256 acc) { return _mm256_fmadd_ps(w, x, acc); }
  static float finish(__m256 acc) { return hsum(acc); }
};

struct LoadF32 {
  static __m256 load(const uint8_t* row, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static __m256 load_partial(const uint8_t* row, int64_t i, int64_t count) {
    return load_f32_partial(reinterpret_cast<const float*>(row) + i, count);
  }
};
struct LoadF16 {
  static __m256 load(const uint8_t* row, int64_t i) { return load_f16(reinterpret_cast<const uint16_t*>(row) + i); }
  static __m256 load_partial(const uint8_t* row, int64_t i, int64_t count) {
    return load_f16_partial(reinterpret_cast<const uint16_t*>(row) + i, count);
  }
};
struct LoadBF16 {
  static __m256 load(const uint8_t* row, int64_t i) { return load_bf16(reinterpret_cast<const uint16_t*>(row) + i); }
  static __m256 load_partial(const uint8_t* row, int64_t i, int64_t count) {
    return load_bf16_partial(reinterpret_cast<const uint16_t*>(row) + i, count);
  }
};

using F32Kind = FloatKind<LoadF32>;
using F16Kind = FloatKind<LoadF16>;
using BF16Kind = FloatKind<LoadBF16>;

// ---- 32-element blocks against Q8_0 activations ----
// A step is one block: the 32 signed weight quants as int8 (|q| precomputed for maddubs, which
// needs an unsigned operand), the f32 scale. Per pair: 32 products summed exactly into 8 int32
// lanes, then acc += (d_w * d_x) * lanes.
struct QBlockW {
  __m256i q;
  __m256i abs_q;
  __m256 d;
};
struct Q8X {
  __m256i q;
  __m256 d;
};

inline Q8X load_q8_0(const uint8_t* row, int64_t s) {
  const uint8_t* b = row + s * sizeof(BlockQ8_0);
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(BlockQ8_0, qs))),
          _mm256_set1_ps(load_f16_scalar(b + offsetof(BlockQ8_0, d)))};
}

inline __m256 fold_q8(const QBlockW& w, const Q8X& x, __m256 acc) {
  // sign(x, w) * |w| = x * w; |w| <= 128 and |x| <= 127 keep maddubs' int16 pair sums unsaturated.
  const __m256i prod16 = _mm256_maddubs_epi16(w.abs_q, _mm256_sign_epi8(x.q, w.q));
  const __m256i prod32 = _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
  return _mm256_fmadd_ps(_mm256_mul_ps(w.d, x.d), _mm256_cvtepi32_ps(prod32), acc);
}

struct Q8_0Kind {
  static constexpr int kStep = kQK8_0;
  static constexpr bool kHasTail = false;
  static constexpr int kMaxRows = 4;
  static constexpr int kMaxTokens = 2;
  using W = QBlockW;
  using X = Q8X;
  static W load_w(const uint8_t* row, int64_t s) {
    const Q8X b = load_q8_0(row, s);
    return {b.q, _mm256_sign_epi8(b.q, b.q), b.d};
  }
  static X load_x(const uint8_t* row, int64_t s) { return load_q8_0(row, s); }
  static __m256 fold(const W& w, const X& x, __m256 acc) { return fold_q8(w, x, acc); }
  static float finish(__m256 acc) { return hsum(acc); }
};

struct Q4_0Kind {
  static constexpr int kStep = kQK4_0;
  static constexpr bool kHasTail = false;
  static constexpr int kMaxRows = 4;
  static constexpr int kMaxTokens = 2;
  using W = QBlockW;
  using X = Q8X;
  static W load_w(const uint8_t* row, int64_t s) {
    const uint8_t* b = row + s * sizeof(BlockQ4_0);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(BlockQ4_0, qs)));
    // Low nibbles are elements 0..15, high nibbles 16..31.
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0f));
    const __m256i q = _mm256_sub_epi8(nib, _mm256_set1_epi8(8));
    return {q, _mm256_sign_epi8(q, q), _mm256_set1_ps(load_f16_scalar(b + offsetof(BlockQ4_0, d)))};
  }
  static X load_x(const uint8_t* row, int64_t s) { return load_q8_0(row, s); }
  static __m256 fold(const W& w, const X& x, __m256 acc) { return fold_q8(w, x, acc); }
  static float finish(__m256 acc) { return hsum(acc); }
};

}  // namespace

void vec_dot(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out) {
  switch (wtype) {
    case DType::kF32:
      return vec_dot_kind<F32Kind>(n, w_row, x_row, out);
    case DType::kF16:
      return vec_dot_kind<F16Kind>(n, w_row, x_row, out);
    case DType::kBF16:
      return vec_dot_kind<BF16Kind>(n, w_row, x_row, out);
    case DType::kQ8_0:
      HZ_CHECK(n % kQK8_0 == 0);
      return vec_dot_kind<Q8_0Kind>(n, w_row, x_row, out);
    case DType::kQ4_0:
      HZ_CHECK(n % kQK4_0 == 0);
      return vec_dot_kind<Q4_0Kind>(n, w_row, x_row, out);
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      HZ_CHECK(n % kQK_K == 0);
      return vec_dot_kquant(wtype, n, w_row, x_row, out);
    default:
      HZ_CHECK_MSG(false, "vec_dot: unsupported weight dtype");
  }
}

void matmul(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
            const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  switch (wtype) {
    case DType::kF32:
      return matmul_kind<F32Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kF16:
      return matmul_kind<F16Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kBF16:
      return matmul_kind<BF16Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kQ8_0:
      HZ_CHECK(n % kQK8_0 == 0);
      return matmul_kind<Q8_0Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kQ4_0:
      HZ_CHECK(n % kQK4_0 == 0);
      return matmul_kind<Q4_0Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      HZ_CHECK(n % kQK_K == 0);
      return matmul_kquant(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    default:
      HZ_CHECK_MSG(false, "matmul: unsupported weight dtype");
  }
}

}  // namespace hz::kernels::avx2
