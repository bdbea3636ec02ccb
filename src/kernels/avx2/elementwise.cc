// AVX2 row kernels: rms_norm, swiglu, softmax, axpys and the small dots of attention. Reductions use
// four 8-lane accumulators over 32-element steps, then one fixed combine, so results depend on n only.
// axpy/axpy_f16 use an FMA (one rounding, where the reference rounds twice); add/scale are exact.
#include <cmath>
#include <limits>

#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels::avx2 {
namespace {

// Sum over i of f(i) where f(i) returns the 8-lane term for elements [i, i+8) (partial for the
// tail). Order: 4 accumulators over 32-element steps, then 8-element steps into acc0, then the
// zero-padded tail into acc0, then (acc0 + acc1) + (acc2 + acc3), then hsum.
template <class Term, class TailTerm>
float reduce_sum(int64_t n, Term term, TailTerm tail_term) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = term(i, acc0);
    acc1 = term(i + 8, acc1);
    acc2 = term(i + 16, acc2);
    acc3 = term(i + 24, acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = term(i, acc0);
  if (i < n) acc0 = tail_term(i, n - i, acc0);
  return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  return reduce_sum(
      n, [&](int64_t i, __m256 acc) { return _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc); },
      [&](int64_t i, int64_t c, __m256 acc) {
        return _mm256_fmadd_ps(load_f32_partial(a + i, c), load_f32_partial(b + i, c), acc);
      });
}

float dot_f32_f16(const float* a, const uint16_t* b, int64_t n) {
  return reduce_sum(
      n, [&](int64_t i, __m256 acc) { return _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_f16(b + i), acc); },
      [&](int64_t i, int64_t c, __m256 acc) {
        return _mm256_fmadd_ps(load_f32_partial(a + i, c), load_f16_partial(b + i, c), acc);
      });
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  const float sum_sq = reduce_sum(
      n,
      [&](int64_t i, __m256 acc) {
        const __m256 v = _mm256_loadu_ps(x + i);
        return _mm256_fmadd_ps(v, v, acc);
      },
      [&](int64_t i, int64_t c, __m256 acc) {
        const __m256 v = load_f32_partial(x + i, c);
        return _mm256_fmadd_ps(v, v, acc);
      });
  const float mean = sum_sq / static_cast<float>(n);
  const float s = 1.0f / std::sqrt(mean + eps);
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), sv);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(y + i, v);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + i, m), sv);
    if (w) v = _mm256_mul_ps(v, _mm256_maskload_ps(w + i, m));
    _mm256_maskstore_ps(y + i, m, v);
  }
}

void swiglu(float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
  auto kernel = [&](__m256 g, __m256 u) {
    const __m256 e = exp_ps(_mm256_xor_ps(g, neg));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, kernel(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(gate + i, m, kernel(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
}

// Tails use masked loads and stores, so every element goes through the same vector instruction.
// NOTE: GCC contracts a * x + y (scalar or vector) into an FMA in these -mfma translation units, so
// the axpys state their FMA explicitly rather than pretend to round twice.
template <class Op>
void elementwise(float* y, int64_t n, Op op) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, op(i, _mm256_loadu_ps(y + i), 8));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, op(i, _mm256_maskload_ps(y + i, m), n - i));
  }
}

inline __m256 load_f32_n(const float* p, int64_t count) {
  return count == 8 ? _mm256_loadu_ps(p) : load_f32_partial(p, count);
}
inline __m256 load_f16_n(const uint16_t* p, int64_t count) {
  return count == 8 ? load_f16(p) : load_f16_partial(p, count);
}

void add(float* y, const float* x, int64_t n) {
  elementwise(y, n, [&](int64_t i, __m256 v, int64_t c) { return _mm256_add_ps(v, load_f32_n(x + i, c)); });
}

void axpy(float* y, float a, const float* x, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  elementwise(y, n, [&](int64_t i, __m256 v, int64_t c) {
    return _mm256_fmadd_ps(av, load_f32_n(x + i, c), v);
  });
}

void scale(float* x, float a, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  elementwise(x, n, [&](int64_t, __m256 v, int64_t) { return _mm256_mul_ps(v, av); });
}

void axpy_f16(float* y, float a, const uint16_t* x, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  elementwise(y, n, [&](int64_t i, __m256 v, int64_t c) {
    return _mm256_fmadd_ps(av, load_f16_n(x + i, c), v);
  });
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float ninf = -std::numeric_limits<float>::infinity();
  __m256 mv = _mm256_set1_ps(ninf);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
  float max = hmax(mv);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  if (max == ninf) {  // everything masked: no probability mass anywhere (as the reference)
    for (int64_t j = 0; j < n; ++j) x[j] = 0.0f;
    return;
  }
  const __m256 maxv = _mm256_set1_ps(max);
  const float sum = reduce_sum(
      n,
      [&](int64_t j, __m256 acc) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), maxv));
        _mm256_storeu_ps(x + j, e);
        return _mm256_add_ps(acc, e);
      },
      [&](int64_t j, int64_t c, __m256 acc) {
        const __m256i m = tail_mask(c);
        // Masked-off lanes: exp(-inf - max) = 0, so they add nothing.
        const __m256 v = _mm256_blendv_ps(_mm256_set1_ps(ninf), _mm256_maskload_ps(x + j, m), _mm256_castsi256_ps(m));
        const __m256 e = exp_ps(_mm256_sub_ps(v, maxv));
        _mm256_maskstore_ps(x + j, m, e);
        return _mm256_add_ps(acc, e);
      });
  scale(x, 1.0f / sum, n);
}

}  // namespace hz::kernels::avx2
