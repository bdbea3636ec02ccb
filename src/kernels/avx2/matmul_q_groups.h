// The 8-row group driver of the Q4_0/Q8_0 matmuls, shared by the AVX2 (avx2/matmul_q.cc) and the
// AVX-512 VNNI (avx512/matmul_q_vnni.cc) translation units, which differ only in their "kinds" (how
// a decoded block is dotted with an activation block). Include only from files compiled with at
// least -mavx2 -mfma -mf16c.
//
// NOTE: everything here has internal linkage (anonymous namespace) and uses no standard-library
// template: each TU gets its own copy compiled with its own ISA flags. An inline or template entity
// with external linkage would be merged by the linker, and the copy kept could be the AVX-512 one,
// reached from the AVX2 path on a CPU without AVX-512. For the same reason the per-thread scratch of
// block sums is a plain function defined once, in the AVX2 TU (block_sum_scratch).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/avx2/int_lanes.h"
#include "kernels/kernels.h"
#include "kernels/unaligned.h"

namespace hz::kernels::avx2 {

// Per-thread buffer of at least `count` int32 (grown once, never shrunk): the Q8_0 activation block
// sums of one matmul_rows call. Defined in avx2/matmul_q.cc.
int32_t* block_sum_scratch(size_t count);

namespace {

constexpr int kGroup = 8;        // weight rows per group (one f32 lane each)
constexpr int kTokenChunk = 32;  // tokens per pass over a group's weights (activations stay in L2)
constexpr int64_t kPrefetchAhead = 1024;  // bytes of packed weights requested ahead of the block in use

inline float f16_at(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

// The f16 scales of block b of 8 rows, as f32 lanes.
inline __m256 group_scales(const uint8_t* const* rows, int64_t offset) {
  const __m128i h = _mm_setr_epi16(
      static_cast<int16_t>(load_u16(rows[0] + offset)), static_cast<int16_t>(load_u16(rows[1] + offset)),
      static_cast<int16_t>(load_u16(rows[2] + offset)), static_cast<int16_t>(load_u16(rows[3] + offset)),
      static_cast<int16_t>(load_u16(rows[4] + offset)), static_cast<int16_t>(load_u16(rows[5] + offset)),
      static_cast<int16_t>(load_u16(rows[6] + offset)), static_cast<int16_t>(load_u16(rows[7] + offset)));
  return _mm256_cvtph_ps(h);
}

// ---- block decoding into lanes (lane r of every vector = row r) ----

// Q4_0 block b of 8 GGUF rows: v[k] lane r = nibbles (0..15) of row r, elements 4k..4k+3 (k < 4),
// v[4 + k] = elements 16+4k..16+4k+3.
inline void decode_q4_0_rows(const uint8_t* const* rows, int64_t b, __m256i v[8], __m256* d) {
  const int64_t off = b * static_cast<int64_t>(sizeof(BlockQ4_0));
  __m256i in[4], t[4];
  for (int r = 0; r < 4; ++r) {
    in[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(rows[r] + off + 2)), load128(rows[r + 4] + off + 2), 1);
  }
  transpose4_epi32(in, t);
  const __m256i m = _mm256_set1_epi8(0x0f);
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_and_si256(t[k], m);
    v[4 + k] = _mm256_and_si256(_mm256_srli_epi16(t[k], 4), m);
  }
  *d = group_scales(rows, off);
}
// The same from the packed layout (kernels.h): 8 f16 scales, then the 4 transposed dword vectors.
inline void decode_q4_0_packed(const uint8_t* p, __m256i v[8], __m256* d) {
  const __m256i m = _mm256_set1_epi8(0x0f);
  for (int k = 0; k < 4; ++k) {
    const __m256i t = load256(p + 16 + 32 * k);
    v[k] = _mm256_and_si256(t, m);
    v[4 + k] = _mm256_and_si256(_mm256_srli_epi16(t, 4), m);
  }
  *d = _mm256_cvtph_ps(load128(p));
}
// Q8_0 block b of 8 GGUF rows: v[k] lane r = the int8 quants of row r, elements 4k..4k+3 (k < 8).
inline void decode_q8_0_rows(const uint8_t* const* rows, int64_t b, __m256i v[8], __m256* d) {
  const int64_t off = b * static_cast<int64_t>(sizeof(BlockQ8_0));
  __m256i lo[4], hi[4];
  for (int r = 0; r < 4; ++r) {
    const __m256i x0 = load256(rows[r] + off + 2), x1 = load256(rows[r + 4] + off + 2);
    lo[r] = _mm256_permute2x128_si256(x0, x1, 0x20);
    hi[r] = _mm256_permute2x128_si256(x0, x1, 0x31);
  }
  transpose4_epi32(lo, v);
  transpose4_epi32(hi, v + 4);
  *d = group_scales(rows, off);
}
inline void decode_q8_0_packed(const uint8_t* p, __m256i v[8], __m256* d) {
  for (int k = 0; k < 8; ++k) v[k] = load256(p + 16 + 32 * k);
  *d = _mm256_cvtph_ps(load128(p));
}

// 8 * the sum of the quants of every block of every token (the kinds' correction term).
inline void block_sums(int64_t nb, const uint8_t* x, uint64_t x_row_bytes, int64_t num_tokens, int32_t* out) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i q = load256(x + t * x_row_bytes + b * sizeof(BlockQ8_0) + 2);
      out[t * nb + b] = 8 * hsum_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16));
    }
  }
}

// ---- the driver ----
// A kind K provides: kBlockBytes, kNeedsXSum, a decoded-block type W (with an f32 scale vector d),
// decode(rows, b, W*), decode_packed(p, W*), and dot(W, xq, xsum8) -> the exact int32 block dots of
// the 8 rows with one activation block (xsum8 = 8 * the sum of its quants).

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
  void prefetch(int64_t) const {}
};
// ...or the packed layout, already transposed (r0 is a multiple of 8 there).
template <class K>
struct PackedSource {
  const uint8_t* w;
  uint64_t group_bytes;
  const uint8_t* group;
  void start(int64_t r0, int64_t) { group = w + (r0 / kGroup) * group_bytes; }
  void decode(int64_t b, typename K::W* wd) const { K::decode_packed(group + b * kGroup * K::kBlockBytes, wd); }
  // The lines kPrefetchAhead bytes past block b (software prefetch: groups are contiguous, so past a
  // group's end this reaches the next group's first blocks). A few tokens' compute per block is
  // enough to stall the stream otherwise: the hardware prefetcher does not run that far ahead.
  void prefetch(int64_t b) const {
    // One request per 64 bytes of a block's span: whatever its alignment, every line it touches
    // is requested by this block or the next.
    const uint8_t* p = group + b * kGroup * K::kBlockBytes + kPrefetchAhead;
    for (uint64_t l = 0; l < kGroup * K::kBlockBytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T0);
  }
};

// Where the activation blocks come from: Q8_0 rows (plus the block sums computed per call)...
struct XRows {
  const uint8_t* x;
  uint64_t row_bytes;
  const int32_t* xsum8;  // [token][block], or null when the kind needs none
  int64_t nb;
  // Block b of token t, then of the tokens after it (next()).
  struct Cursor {
    const uint8_t* p;
    uint64_t stride;
    const int32_t* s;
    int64_t s_stride;
    const uint8_t* qs() const { return p + 2; }
    float d() const { return f16_at(p); }
    int32_t sum8() const { return s != nullptr ? *s : 0; }
    void next() {
      p += stride;
      if (s != nullptr) s += s_stride;
    }
  };
  Cursor at(int64_t t, int64_t b) const {
    return {x + t * row_bytes + b * sizeof(BlockQ8_0), row_bytes, xsum8 != nullptr ? xsum8 + t * nb + b : nullptr, nb};
  }
};
// ...or packed activations (kernels.h): a chunk's tokens side by side for each block.
struct XChunks {
  const uint8_t* x;
  int64_t nb;
  const uint8_t* entry(int64_t t, int64_t b) const {
    const int64_t c = t / kPackedTokenChunk, j = t % kPackedTokenChunk;
    return x + ((c * nb + b) * kPackedTokenChunk + j) * kPackedActivationEntryBytes;
  }
  // Block b of token t, then of the tokens after it up to the end of t's chunk (next()).
  struct Cursor {
    const uint8_t* p;
    const uint8_t* qs() const { return p + 8; }
    float d() const { return load_f32(p); }
    int32_t sum8() const { return -load_i32(p + 4); }  // stored negated (kernels.h)
    void next() { p += kPackedActivationEntryBytes; }
    Cursor plus(int64_t t) const { return {p + t * kPackedActivationEntryBytes}; }  // t tokens on, same chunk
  };
  Cursor at(int64_t t, int64_t b) const { return {entry(t, b)}; }
};

// One token (decode) or a few (speculative verification, small decode batches): their accumulators
// stay in registers for the whole pass over the group's blocks. The same fma per block, in block order.
constexpr int kRegisterTokens = 8;
template <class K, int NT, class Source, class X>
inline void group_tokens(int64_t nb, const Source& src, const X& x, int64_t t0, typename K::W* wd, float (*acc)[kGroup]) {
  __m256 a[NT];
  for (int t = 0; t < NT; ++t) a[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    src.prefetch(b);
    src.decode(b, wd);
    auto c = x.at(t0, b);
    for (int t = 0; t < NT; ++t, c.next()) {
      const __m256i isum = K::dot(*wd, c.qs(), c.sum8());
      const __m256 d = _mm256_mul_ps(wd->d, _mm256_set1_ps(c.d()));
      a[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), a[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_store_ps(acc[t], a[t]);
}
// nt in [1, kRegisterTokens] -> group_tokens<K, nt>.
template <class K, int NT = 1, class Source, class X>
inline void group_in_registers(int64_t nb, const Source& src, const X& x, int64_t t0, int64_t nt, typename K::W* wd,
                               float (*acc)[kGroup]) {
  if constexpr (NT < kRegisterTokens) {
    if (nt != NT) return group_in_registers<K, NT + 1>(nb, src, x, t0, nt, wd, acc);
  }
  group_tokens<K, NT>(nb, src, x, t0, wd, acc);
}

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
      if (nt <= kRegisterTokens) {
        group_in_registers<K>(nb, src, x, t0, nt, &wd, acc);
      } else {
        for (int64_t t = 0; t < nt; ++t) _mm256_store_ps(acc[t], _mm256_setzero_ps());
        for (int64_t b = 0; b < nb; ++b) {
          src.prefetch(b);
          src.decode(b, &wd);
          auto c = x.at(t0, b);
          for (int64_t t = 0; t < nt; ++t, c.next()) {
            const __m256i isum = K::dot(wd, c.qs(), c.sum8());
            const __m256 d = _mm256_mul_ps(wd.d, _mm256_set1_ps(c.d()));
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

// GGUF rows against Q8_0 rows: the block sums (when the kind needs them) are computed once per call.
template <class K>
void matmul_rows(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  if (row_end <= row_begin || num_tokens <= 0) return;
  const int64_t nb = n / kQK8_0;
  const auto* xb = static_cast<const uint8_t*>(x);
  int32_t* xsum = nullptr;
  if constexpr (K::kNeedsXSum) {
    xsum = block_sum_scratch(static_cast<size_t>(nb * num_tokens));
    block_sums(nb, xb, x_row_bytes, num_tokens, xsum);
  }
  RowsSource<K> src{static_cast<const uint8_t*>(w), w_row_bytes, {}};
  const XRows xr{xb, x_row_bytes, xsum, nb};
  matmul_groups<K>(n, src, row_begin, row_end, xr, num_tokens, y, y_stride);
}

// Packed weights against packed activations (row_begin a multiple of 8).
template <class K>
void matmul_packed_kind(int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                        int64_t num_tokens, float* y, int64_t y_stride, uint64_t group_bytes) {
  const PackedSource<K> src{static_cast<const uint8_t*>(packed), group_bytes, nullptr};
  const XChunks xc{static_cast<const uint8_t*>(x), n / kQK8_0};
  matmul_groups<K>(n, src, row_begin, row_end, xc, num_tokens, y, y_stride);
}

}  // namespace
}  // namespace hz::kernels::avx2
