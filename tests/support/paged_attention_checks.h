// The paged-attention checks shared by tests/cuda/cuda_attention_test.cc (the GPU kernel) and
// tests/kernels/host_paged_attention_test.cc (its host form, kernels/cuda/host_reference.h): a
// random arena of sequences in shuffled blocks, a double-precision reference built from the scalar
// KV decoder, and the exactness rule. Any backend of kernels/cuda/backend.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/kv_block_table.h"
#include "kernels/cuda/launch_checks.h"
#include "kernels/kv_codec.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::test {

using kernels::KvCodec;

inline uint32_t attn_float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

constexpr int32_t kHeads = 8, kKvHeads = 2, kBlockTokens = 16, kLayers = 2, kLayer = 1;

struct Query {
  int32_t seq;
  int64_t pos;
};

class PagedAttentionFixture {
 public:
  // `heads` query heads over `kv_heads` KV heads, `block_tokens` positions per block.
  PagedAttentionFixture(KvCodec codec, int32_t head_dim, const std::vector<int64_t>& lengths, uint32_t seed,
                        int32_t heads = kHeads, int32_t kv_heads = kKvHeads, int32_t block_tokens = kBlockTokens)
      : hd_(head_dim), heads_(heads), kv_heads_(kv_heads), bt_(block_tokens), lengths_(lengths), rng_(seed) {
    geo_.num_layers = kLayers;
    geo_.num_kv_heads = kv_heads_;
    geo_.head_dim = head_dim;
    geo_.block_tokens = bt_;
    geo_.codec = codec;
    int64_t num_blocks = 0;
    for (int64_t l : lengths) num_blocks += (l + bt_ - 1) / bt_;
    num_blocks += 3;  // unused blocks in between
    arena_.assign(static_cast<size_t>(num_blocks * geo_.block_bytes()), 0xff);
    std::vector<int64_t> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng_);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // Rows encoded one at a time as the device writes them (fp8: one scale per row).
    const int64_t reb = kernels::kv_row_elem_bytes(codec, hd_), rsb = device::arena_row_scale_bytes(codec, hd_);
    std::vector<float> rows(bt_ * hd_);
    size_t next = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      std::vector<device::DeviceKvBlock> table;
      for (int64_t b = 0; b < (lengths[s] + bt_ - 1) / bt_; ++b) {
        const device::DeviceKvBlock d = device::arena_block_descriptor(geo_, ids[next++]);
        table.push_back(d);
        for (int32_t layer = 0; layer < kLayers; ++layer) {
          const uint64_t lo = geo_.layer_offset(layer);
          for (int stream = 0; stream < 2; ++stream) {
            for (int32_t h = 0; h < kv_heads_; ++h) {
              for (auto& v : rows) v = nd(rng_) * 2.0f;
              for (int32_t slot = 0; slot < bt_; ++slot) {
                const int64_t r = static_cast<int64_t>(h) * bt_ + slot;
                uint8_t* elems = arena_.data() + (stream ? d.v_elems : d.k_elems) + lo + r * reb;
                uint8_t* scales = arena_.data() + (stream ? d.v_scales : d.k_scales) + lo + r * rsb;
                kernels::ref::encode_kv_rows(codec, rows.data() + slot * hd_, 1, hd_, elems, scales);
              }
            }
          }
        }
      }
      tables_.push_back(std::move(table));
    }
  }

  // The reference row (decoded by the scalar codec) of sequence s, key position `key`, KV head h.
  std::vector<float> row(int32_t s, int64_t key, int32_t h, bool v) const {
    const device::DeviceKvBlock& d = tables_[s][key / bt_];
    const int64_t slot = key % bt_;
    const KvCodec c = geo_.codec;
    const int64_t reb = kernels::kv_row_elem_bytes(c, hd_), rsb = device::arena_row_scale_bytes(c, hd_);
    const uint64_t lo = geo_.layer_offset(kLayer);
    const uint8_t* elems = arena_.data() + (v ? d.v_elems : d.k_elems) + lo + (h * bt_ + slot) * reb;
    const uint8_t* scales = arena_.data() + (v ? d.v_scales : d.k_scales) + lo + (h * bt_ + slot) * rsb;
    std::vector<float> out(hd_);
    kernels::ref::decode_kv_rows(c, elems, scales, 1, hd_, out.data());
    return out;
  }

  // Double-precision attention of query `q` ([heads_][hd], unscaled) at (s, pos).
  std::vector<double> reference(const float* q, int32_t s, int64_t pos, int64_t window) const {
    const int64_t first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
    std::vector<double> out(static_cast<size_t>(heads_) * hd_, 0.0);
    for (int32_t h = 0; h < heads_; ++h) {
      const int32_t kvh = h / (heads_ / kv_heads_);
      std::vector<double> scores;
      for (int64_t k = first; k <= pos; ++k) {
        const auto kr = row(s, k, kvh, false);
        double sc = 0;
        for (int32_t d = 0; d < hd_; ++d) sc += static_cast<double>(q[h * hd_ + d] * scale) * kr[d];
        scores.push_back(sc);
      }
      const double mx = *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (auto& sc : scores) sum += (sc = std::exp(sc - mx));
      for (int64_t k = first; k <= pos; ++k) {
        const auto vr = row(s, k, kvh, true);
        for (int32_t d = 0; d < hd_; ++d) out[h * hd_ + d] += scores[k - first] / sum * vr[d];
      }
    }
    return out;
  }

  // Runs the queries (each [heads_][hd] in `q`) in one launch on `be`; returns [queries][heads_][hd].
  std::vector<float> run(cuda::Backend& be, const std::vector<Query>& queries, const std::vector<float>& q, int64_t window,
                         bool prefill) const {
    std::vector<int32_t> qseq;
    std::vector<int64_t> qpos;
    for (const Query& x : queries) {
      qseq.push_back(x.seq);
      qpos.push_back(x.pos);
    }
    const int32_t qb = cuda::attention_query_block(heads_ / kv_heads_, prefill);
    auto up = device::build_attention_upload(tables_, qseq, qpos, bt_, window, qb);
    EXPECT_TRUE(up.ok()) << up.status().message();
    if (!up.ok()) return {};
    const int64_t partials = cuda::attention_partial_floats(up->num_queries, heads_, up->max_segments, hd_);
    const uint64_t out_bytes = queries.size() * heads_ * hd_ * sizeof(float);
    auto darena = upload(be, arena_.data(), arena_.size());
    auto dup = upload(be, up->bytes.data(), up->bytes.size());
    auto dq = upload(be, q.data(), q.size() * sizeof(float));
    auto dpart = poisoned(be, static_cast<uint64_t>(partials) * sizeof(float));
    auto dout = poisoned(be, out_bytes);
    cuda::PagedAttnArgs a;
    a.arena = darena.as<uint8_t>();
    a.layer_offset = geo_.layer_offset(kLayer);
    device::bind_attention_upload(*up, dup.as<uint8_t>(), &a);
    a.qblock_size = qb;
    a.num_heads = heads_;
    a.num_kv_heads = kv_heads_;
    a.head_dim = hd_;
    a.block_tokens = bt_;
    a.window = window;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd_));
    a.q = dq.as<float>();
    a.partials = dpart.as<float>();
    a.out = dout.as<float>();
    Status s = be.paged_attention(a);
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<float> out(queries.size() * heads_ * hd_);
    s = be.download(out.data(), dout.data(), out_bytes);
    EXPECT_TRUE(s.ok()) << s.message();
    return out;
  }

 private:
  static cuda::DeviceMemory upload(cuda::Backend& be, const void* src, uint64_t bytes) {
    auto m = be.allocate(std::max<uint64_t>(bytes, 1), "test array");
    EXPECT_TRUE(m.ok()) << m.status().message();
    if (!m.ok()) return {};
    Status s = be.upload(m->data(), src, bytes);
    EXPECT_TRUE(s.ok()) << s.message();
    s = be.synchronize();
    EXPECT_TRUE(s.ok()) << s.message();
    return std::move(m).value();
  }
  // Every byte 0xff (NaN for floats), so an unwritten output shows.
  static cuda::DeviceMemory poisoned(cuda::Backend& be, uint64_t bytes) {
    std::vector<uint8_t> ff(bytes, 0xff);
    return upload(be, ff.data(), bytes);
  }

 public:
  int32_t hd_;
  int32_t heads_, kv_heads_, bt_;
  std::vector<int64_t> lengths_;
  std::mt19937 rng_;
  device::ArenaGeometry geo_;
  std::vector<uint8_t> arena_;
  std::vector<std::vector<device::DeviceKvBlock>> tables_;
};

struct AttentionParam {
  KvCodec codec;
  int32_t head_dim;
  int32_t heads = kHeads;
  int32_t kv_heads = kKvHeads;
  int32_t block_tokens = kBlockTokens;
};

// Paged attention on `be` against the double-precision reference for codec and head dim `p`, and
// the exactness rule: a query's output is the same bits in decode, in a prefill query block, in a
// batch or alone, and under another chunking; with and without a sliding window.
inline void check_paged_attention(cuda::Backend& be, const AttentionParam& p) {
  const std::vector<int64_t> lengths = {1, 700, 1600};
  PagedAttentionFixture f(p.codec, p.head_dim, lengths, 99 + p.head_dim, p.heads, p.kv_heads, p.block_tokens);
  const int64_t qsize = static_cast<int64_t>(p.heads) * p.head_dim;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // One query vector per (seq, pos), so every launch below sees the same q for the same position.
  auto qvec = [&](int32_t s, int64_t pos) {
    std::mt19937 r(static_cast<uint32_t>(s * 100003 + pos));
    std::vector<float> v(qsize);
    for (auto& x : v) x = nd(r);
    return v;
  };
  for (int64_t window : {int64_t{0}, int64_t{700}}) {
    SCOPED_TRACE(testing::Message() << "window " << window);
    // Decode: one query per sequence at its last position.
    std::vector<Query> dec = {{0, 0}, {1, 699}, {2, 1599}};
    // Prefill: the last 40 positions of sequence 2 and the last 20 of sequence 1, in query blocks.
    std::vector<Query> pre;
    for (int64_t pos = 1560; pos < 1600; ++pos) pre.push_back({2, pos});
    for (int64_t pos = 680; pos < 700; ++pos) pre.push_back({1, pos});
    auto gather = [&](const std::vector<Query>& qs) {
      std::vector<float> v;
      for (const Query& x : qs) {
        auto one = qvec(x.seq, x.pos);
        v.insert(v.end(), one.begin(), one.end());
      }
      return v;
    };
    const auto out_dec = f.run(be, dec, gather(dec), window, false);
    const auto out_pre = f.run(be, pre, gather(pre), window, true);
    ASSERT_EQ(out_dec.size(), dec.size() * qsize);
    ASSERT_EQ(out_pre.size(), pre.size() * qsize);
    // Against the reference, every output written and finite.
    auto check = [&](const std::vector<Query>& qs, const std::vector<float>& out, size_t stride) {
      for (size_t i = 0; i < qs.size(); i += stride) {
        const auto q = qvec(qs[i].seq, qs[i].pos);
        const auto ref = f.reference(q.data(), qs[i].seq, qs[i].pos, window);
        for (int64_t j = 0; j < qsize; ++j) {
          const float g = out[i * qsize + j];
          ASSERT_TRUE(std::isfinite(g)) << "query " << i << " element " << j;
          ASSERT_NEAR(g, ref[j], 2e-5 + 2e-5 * std::fabs(ref[j])) << "seq " << qs[i].seq << " pos " << qs[i].pos << " element " << j;
        }
      }
    };
    check(dec, out_dec, 1);
    check(pre, out_pre, 7);
    // Exactness: decode of (2, 1599) and (1, 699) equals their rows inside the prefill launch,
    // and a sequence decoded alone equals its row in the batch.
    auto same = [&](const float* a, const float* b, const char* what) {
      for (int64_t j = 0; j < qsize; ++j) ASSERT_EQ(attn_float_bits(a[j]), attn_float_bits(b[j])) << what << " element " << j;
    };
    same(out_dec.data() + 2 * qsize, out_pre.data() + 39 * qsize, "decode vs prefill (2, 1599)");
    same(out_dec.data() + 1 * qsize, out_pre.data() + 59 * qsize, "decode vs prefill (1, 699)");
    const std::vector<Query> alone = {{2, 1599}};
    const auto out_alone = f.run(be, alone, gather(alone), window, false);
    same(out_dec.data() + 2 * qsize, out_alone.data(), "batch vs alone");
    // Prefill chunked differently (starting at 1571 instead of 1560): same bits for 1599.
    std::vector<Query> chunk;
    for (int64_t pos = 1571; pos < 1600; ++pos) chunk.push_back({2, pos});
    const auto out_chunk = f.run(be, chunk, gather(chunk), window, true);
    same(out_pre.data() + 39 * qsize, out_chunk.data() + 28 * qsize, "chunking");
  }
}

inline std::string attention_param_name(const ::testing::TestParamInfo<AttentionParam>& info) {
  static const char* kNames[] = {"f32", "f16", "bf16", "fp8", "int8", "int4"};
  const AttentionParam& p = info.param;
  std::string name = std::string(kNames[static_cast<int>(p.codec)]) + "_hd" + std::to_string(p.head_dim);
  if (p.heads != kHeads || p.kv_heads != kKvHeads) name += "_h" + std::to_string(p.heads) + "kv" + std::to_string(p.kv_heads);
  if (p.block_tokens != kBlockTokens) name += "_bt" + std::to_string(p.block_tokens);
  return name;
}

// Every codec; head dims 8..256, some not a multiple of 32 (a last scale group cut short) or of
// 4; query groups of 1, 3 and 6 heads per KV head (rows not a multiple of the kernels' row
// batch); blocks of 1, 7 and 1024 positions (planes of odd size: scales at odd addresses).
inline std::vector<AttentionParam> attention_params() {
  return {{KvCodec::kF32, 64},          {KvCodec::kF16, 128},         {KvCodec::kBF16, 64},
          {KvCodec::kFp8, 128},         {KvCodec::kInt8, 128},        {KvCodec::kInt4, 64},
          {KvCodec::kF16, 8},           {KvCodec::kInt8, 20},         {KvCodec::kF16, 256},
          {KvCodec::kInt4, 80},         {KvCodec::kInt8, 80},         {KvCodec::kFp8, 80},
          {KvCodec::kF32, 20},          {KvCodec::kF16, 64, 3, 3},    {KvCodec::kInt8, 64, 6, 2},
          {KvCodec::kFp8, 18, 6, 1, 7}, {KvCodec::kInt4, 18, 3, 3, 7}, {KvCodec::kInt8, 40, 4, 1, 1},
          {KvCodec::kF16, 32, 8, 2, 1024}};
}

}  // namespace hz::test
