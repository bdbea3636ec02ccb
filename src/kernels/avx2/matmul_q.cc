// AVX2 vec_dot and matmul for Q4_0 and Q8_0 weights against Q8_0 activations.
// matmul works on groups of 8 weight rows whose blocks are transposed in registers so that lane r of
// every vector belongs to row r: one block of one token then costs a handful of integer ops for all
// 8 rows, the weights of a block are decoded once for every token of the call, and no horizontal
// sum is needed. Arithmetic per output element (the contract shared with vec_dot and the scalar
// reference): isum_b = exact int32 dot of block b, acc = fma(d_w * d_x, float(isum_b), acc) in
// block order from 0; which rows or tokens share a call never changes an element.
#include <cmath>
#include <cstddef>
#include <vector>

#include "base/check.h"
#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels::avx2 {
namespace {

constexpr int kGroup = 8;        // weight rows per group (one f32 lane each)
constexpr int kTokenChunk = 32;  // tokens per pass over a group's weights (activations stay in L2)

inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 4x4 transpose of 32-bit elements within each 128-bit lane: out[k] lane i = in[i] dword k.
inline void transpose4_epi32(const __m256i in[4], __m256i out[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(in[0], in[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(in[0], in[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(in[2], in[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(in[2], in[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The f16 scales of block b of 8 rows, as f32 lanes.
inline __m256 group_scales(const uint8_t* const* rows, int64_t offset) {
  const __m128i h = _mm_setr_epi16(
      static_cast<int16_t>(load_u16(rows[0] + offset)), static_cast<int16_t>(load_u16(rows[1] + offset)),
      static_cast<int16_t>(load_u16(rows[2] + offset)), static_cast<int16_t>(load_u16(rows[3] + offset)),
      static_cast<int16_t>(load_u16(rows[4] + offset)), static_cast<int16_t>(load_u16(rows[5] + offset)),
      static_cast<int16_t>(load_u16(rows[6] + offset)), static_cast<int16_t>(load_u16(rows[7] + offset)));
  return _mm256_cvtph_ps(h);
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// ---- Q4_0: weights as unsigned nibbles (0..15); sum(w*x) = sum(nib*x) - 8*sum(x) ----
// maddubs(nib, x) pair sums are <= 2*15*128 = 3840, so 8 of them add up in int16 exactly.
struct Q4_0Kind {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr bool kNeedsXSum = true;
  // Decoded block of 8 rows: lo[k] lane r = nibbles of row r, elements 4k..4k+3; hi[k] = 16+4k..
  struct W {
    __m256i v[8];
    __m256 d;
  };
  static void decode(const uint8_t* const* rows, int64_t b, W* w) {
    const int64_t off = b * static_cast<int64_t>(kBlockBytes);
    __m256i in[4], t[4];
    for (int r = 0; r < 4; ++r) {
      in[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(rows[r] + off + 2)), load128(rows[r + 4] + off + 2), 1);
    }
    transpose4_epi32(in, t);
    const __m256i m = _mm256_set1_epi8(0x0f);
    for (int k = 0; k < 4; ++k) {
      w->v[k] = _mm256_and_si256(t[k], m);
      w->v[4 + k] = _mm256_and_si256(_mm256_srli_epi16(t[k], 4), m);
    }
    w->d = group_scales(rows, off);
  }
  // The same from the packed layout (kernels/packed_weights.h): 8 f16 scales, then v[0..3] raw.
  static void decode_packed(const uint8_t* p, W* w) {
    const __m256i m = _mm256_set1_epi8(0x0f);
    for (int k = 0; k < 4; ++k) {
      const __m256i t = load256(p + 16 + 32 * k);
      w->v[k] = _mm256_and_si256(t, m);
      w->v[4 + k] = _mm256_and_si256(_mm256_srli_epi16(t, 4), m);
    }
    w->d = _mm256_cvtph_ps(load128(p));
  }
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
    const int64_t off = b * static_cast<int64_t>(kBlockBytes);
    __m256i lo[4], hi[4];
    for (int r = 0; r < 4; ++r) {
      const __m256i x0 = load256(rows[r] + off + 2), x1 = load256(rows[r + 4] + off + 2);
      lo[r] = _mm256_permute2x128_si256(x0, x1, 0x20);
      hi[r] = _mm256_permute2x128_si256(x0, x1, 0x31);
    }
    transpose4_epi32(lo, w->v);
    transpose4_epi32(hi, w->v + 4);
    for (int k = 0; k < 8; ++k) w->a[k] = _mm256_sign_epi8(w->v[k], w->v[k]);
    w->d = group_scales(rows, off);
  }
  static void decode_packed(const uint8_t* p, W* w) {
    for (int k = 0; k < 8; ++k) {
      w->v[k] = load256(p + 16 + 32 * k);
      w->a[k] = _mm256_sign_epi8(w->v[k], w->v[k]);
    }
    w->d = _mm256_cvtph_ps(load128(p));
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

// 8 * the sum of the quants of every block of every token (Q4_0's correction term).
void block_sums(int64_t nb, const uint8_t* x, uint64_t x_row_bytes, int64_t num_tokens, int32_t* out) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i q = load256(x + t * x_row_bytes + b * sizeof(BlockQ8_0) + 2);
      out[t * nb + b] = 8 * hsum_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16));
    }
  }
}

// Where a group's blocks come from: 8 rows of the GGUF layout, transposed in registers...
template <class K>
struct RowsSource {
  const uint8_t* w;
  uint64_t row_bytes;
  const uint8_t* rows[kGroup];
  void start(int64_t r0, int64_t nr) {
    // Rows past the range repeat the last one: their lanes are computed and dropped.
    for (int r = 0; r < kGroup; ++r) rows[r] = w + (r0 + (r < nr ? r : nr - 1)) * row_bytes;
  }
  void decode(int64_t b, typename K::W* wd) const { K::decode(rows, b, wd); }
};
// ...or the packed layout, already transposed (r0 is a multiple of 8 there).
template <class K>
struct PackedSource {
  const uint8_t* w;
  uint64_t group_bytes;
  const uint8_t* group;
  void start(int64_t r0, int64_t) { group = w + (r0 / kGroup) * group_bytes; }
  void decode(int64_t b, typename K::W* wd) const { K::decode_packed(group + b * kGroup * K::kBlockBytes, wd); }
};

// Where the activation blocks come from: Q8_0 rows (plus the block sums computed per call)...
struct XRows {
  const uint8_t* x;
  uint64_t row_bytes;
  const int32_t* xsum8;  // [token][block], or null when the kind needs none
  int64_t nb;
  const uint8_t* qs(int64_t t, int64_t b) const { return x + t * row_bytes + b * sizeof(BlockQ8_0) + 2; }
  float d(int64_t t, int64_t b) const { return load_f16_scalar(x + t * row_bytes + b * sizeof(BlockQ8_0)); }
  int32_t sum8(int64_t t, int64_t b) const { return xsum8 != nullptr ? xsum8[t * nb + b] : 0; }
};
// ...or packed activations (kernels.h): a chunk's tokens side by side for each block.
struct XChunks {
  const uint8_t* x;
  int64_t nb;
  const uint8_t* entry(int64_t t, int64_t b) const {
    const int64_t c = t / kPackedTokenChunk, j = t % kPackedTokenChunk;
    return x + ((c * nb + b) * kPackedTokenChunk + j) * kPackedActivationEntryBytes;
  }
  const uint8_t* qs(int64_t t, int64_t b) const { return entry(t, b) + 8; }
  float d(int64_t t, int64_t b) const { return load_f32(entry(t, b)); }
  int32_t sum8(int64_t t, int64_t b) const { return load_i32(entry(t, b) + 4); }
};

template <class K, class Source, class X>
void matmul_groups(int64_t n, Source src, int64_t row_begin, int64_t row_end, const X& x, int64_t num_tokens, float* y,
                   int64_t y_stride) {
  static_assert(kTokenChunk == kPackedTokenChunk);
  const int64_t nb = n / kQK8_0;
  alignas(32) float acc[kTokenChunk][kGroup];
  typename K::W wd;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokenChunk) {
    const int64_t nt = num_tokens - t0 < kTokenChunk ? num_tokens - t0 : kTokenChunk;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroup) {
      const int64_t nr = row_end - r0 < kGroup ? row_end - r0 : kGroup;
      src.start(r0, nr);
      if (nt == 1) {
        // Decode: the accumulator lives in a register.
        __m256 a = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
          src.decode(b, &wd);
          const __m256i isum = K::dot(wd, x.qs(t0, b), x.sum8(t0, b));
          const __m256 d = _mm256_mul_ps(wd.d, _mm256_set1_ps(x.d(t0, b)));
          a = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), a);
        }
        _mm256_store_ps(acc[0], a);
      } else {
        for (int64_t t = 0; t < nt; ++t) _mm256_store_ps(acc[t], _mm256_setzero_ps());
        for (int64_t b = 0; b < nb; ++b) {
          src.decode(b, &wd);
          for (int64_t t = 0; t < nt; ++t) {
            const __m256i isum = K::dot(wd, x.qs(t0 + t, b), x.sum8(t0 + t, b));
            const __m256 d = _mm256_mul_ps(wd.d, _mm256_set1_ps(x.d(t0 + t, b)));
            _mm256_store_ps(acc[t], _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), _mm256_load_ps(acc[t])));
          }
        }
      }
      for (int64_t t = 0; t < nt; ++t) {
        float* yt = y + (t0 + t) * y_stride + r0;
        if (nr == kGroup) {
          _mm256_storeu_ps(yt, _mm256_load_ps(acc[t]));
        } else {
          for (int64_t r = 0; r < nr; ++r) yt[r] = acc[t][r];
        }
      }
    }
  }
}

// GGUF rows against Q8_0 rows: the Q4_0 block sums are computed once per call.
template <class K>
void matmul_rows(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  if (row_end <= row_begin || num_tokens <= 0) return;
  const int64_t nb = n / kQK8_0;
  const auto* xb = static_cast<const uint8_t*>(x);
  // Per-thread scratch, grown once: no allocation per call once warm.
  thread_local std::vector<int32_t> xsum;
  if constexpr (K::kNeedsXSum) {
    if (xsum.size() < static_cast<size_t>(nb * num_tokens)) xsum.resize(nb * num_tokens);
    block_sums(nb, xb, x_row_bytes, num_tokens, xsum.data());
  }
  RowsSource<K> src{static_cast<const uint8_t*>(w), w_row_bytes, {}};
  const XRows xr{xb, x_row_bytes, K::kNeedsXSum ? xsum.data() : nullptr, nb};
  matmul_groups<K>(n, src, row_begin, row_end, xr, num_tokens, y, y_stride);
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
  const auto* p = static_cast<const uint8_t*>(packed);
  const XChunks xc{static_cast<const uint8_t*>(x), n / kQK8_0};
  const uint64_t group_bytes = packed_group_bytes(wtype, n);
  switch (wtype) {
    case DType::kQ4_0:
      return matmul_groups<Q4_0Kind>(n, PackedSource<Q4_0Kind>{p, group_bytes, nullptr}, row_begin, row_end, xc,
                                     num_tokens, y, y_stride);
    case DType::kQ8_0:
      return matmul_groups<Q8_0Kind>(n, PackedSource<Q8_0Kind>{p, group_bytes, nullptr}, row_begin, row_end, xc,
                                     num_tokens, y, y_stride);
    default:
      HZ_CHECK_MSG(false, "matmul_packed: unsupported weight dtype");
  }
}

}  // namespace hz::kernels::avx2
