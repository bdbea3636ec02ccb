// Attention over every KV element type against an exact f32 reference on random data (error bounds
// measured and justified below), and bit-identical f16 attention for block sizes 16, 64 and 256.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "model/attention.h"

namespace hz {
namespace {

struct Data {
  int32_t heads = 2, hd = 64, n = 300;
  std::vector<float> k, v;  // [n][heads][hd]
  std::vector<float> q;     // [hd], pre-scaled by 1/sqrt(hd)
};

Data random_data(int32_t hd, int32_t n, uint32_t seed) {
  Data d;
  d.hd = hd;
  d.n = n;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  d.k.resize(static_cast<size_t>(n) * d.heads * hd);
  d.v.resize(d.k.size());
  for (auto& x : d.k) x = nd(rng);
  for (auto& x : d.v) x = nd(rng);
  d.q.resize(hd);
  // Scores with a spread of about 2: softmax neither uniform nor one-hot.
  for (auto& x : d.q) x = 2.0f * nd(rng) / std::sqrt(static_cast<float>(hd));
  return d;
}

// Fills a cache of `p` with `d` (as the model does: rows written exactly, then committed).
std::unique_ptr<KvCache> fill(const Data& d, KvPrecision p, int32_t bt, std::vector<BlockRef>* table) {
  KvCacheConfig c;
  c.num_layers = 1;
  c.num_kv_heads = d.heads;
  c.head_dim = d.hd;
  c.block_tokens = bt;
  c.num_blocks = (d.n + bt - 1) / bt;
  c.precision = p;
  auto kv = std::make_unique<KvCache>(c);
  EXPECT_TRUE(kv->pool().allocate_n(c.num_blocks, table));
  for (int32_t pos = 0; pos < d.n; ++pos) {
    for (int32_t h = 0; h < d.heads; ++h) {
      for (int32_t st = 0; st < 2; ++st) {
        const float* src = (st == 0 ? d.k : d.v).data() + (static_cast<size_t>(pos) * d.heads + h) * d.hd;
        uint8_t* row = kv->write_row((*table)[pos / bt], 0, st, h, pos % bt);
        if (kv->exact_codec() == kernels::KvCodec::kF32) {
          std::memcpy(row, src, sizeof(float) * d.hd);
        } else {
          for (int32_t i = 0; i < d.hd; ++i) reinterpret_cast<uint16_t*>(row)[i] = f32_to_f16(src[i]);
        }
      }
    }
  }
  kv->commit(table->data(), d.n);
  return kv;
}

std::vector<double> reference(const Data& d, int32_t h, int64_t pos) {
  std::vector<double> s(pos + 1), out(d.hd, 0.0);
  double m = -1e300, sum = 0;
  for (int64_t t = 0; t <= pos; ++t) {
    double acc = 0;
    for (int32_t i = 0; i < d.hd; ++i) acc += static_cast<double>(d.q[i]) * d.k[(t * d.heads + h) * d.hd + i];
    s[t] = acc;
    m = std::max(m, acc);
  }
  for (int64_t t = 0; t <= pos; ++t) {
    double w = std::exp(s[t] - m);
    sum += w;
    for (int32_t i = 0; i < d.hd; ++i) out[i] += w * d.v[(t * d.heads + h) * d.hd + i];
  }
  for (auto& x : out) x /= sum;
  return out;
}

struct Err {
  double max = 0, mean = 0;
};

Err measure(KvPrecision p, int32_t hd, int32_t bt = 16) {
  Err e;
  int count = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    Data d = random_data(hd, 300, seed);
    std::vector<BlockRef> table;
    auto kv = fill(d, p, bt, &table);
    AttnScratch scratch;
    std::vector<float> out(hd);
    for (int64_t pos : {288, 299}) {  // the last block: every earlier block is read encoded
      for (int32_t h = 0; h < d.heads; ++h) {
        attend(*kv, table.data(), 0, h, d.q.data(), pos, out.data(), &scratch);
        auto ref = reference(d, h, pos);
        for (int32_t i = 0; i < hd; ++i) {
          double err = std::fabs(out[i] - ref[i]);
          e.max = std::max(e.max, err);
          e.mean += err;
          ++count;
        }
      }
    }
  }
  e.mean /= count;
  return e;
}

struct Case {
  const char* name;
  KvPrecision p;
  double max_bound, mean_bound;
};

// Bounds: about 2x the errors measured on this data (printed by the test; measured max / mean over
// head dims 32 and 64: f16 4.6e-4 / 7.8e-5, bf16 3.4e-3 / 5.7e-4, fp8 4.0e-2 / 9.5e-3, int8
// 1.2e-2 / 2.2e-3, int4 1.7e-1 / 3.2e-2, f16 hot 64 + int4 1.5e-1 / 2.7e-2), so a codec or
// attention regression that doubles the error fails. Scale: the output is a softmax-weighted mean
// of ~300 N(0,1) values. The error follows each element's resolution: f16 11-bit mantissa, bf16
// 8-bit, fp8 3-bit mantissa with one scale per block and head, int8 amax/127 per 32 values, int4
// amax/8 per 32 values; the mixed case is below int4 because its newest 64 positions are f16.
const Case kCases[] = {
    {"f32", {KvType::kF32, 0, KvType::kF32}, 2e-6, 2e-7},
    {"f16", {KvType::kF16, 0, KvType::kF16}, 1e-3, 2e-4},
    {"bf16", {KvType::kBF16, 0, KvType::kBF16}, 7e-3, 1.2e-3},
    {"fp8", {KvType::kFp8, 0, KvType::kFp8}, 8e-2, 2e-2},
    {"int8", {KvType::kInt8, 0, KvType::kInt8}, 2.5e-2, 4.5e-3},
    {"int4", {KvType::kInt4, 0, KvType::kInt4}, 3e-1, 6e-2},
    {"f16_hot64_int4", {KvType::kF16, 64, KvType::kInt4}, 3e-1, 5e-2},
};

TEST(KvAttentionTest, EachTypeAgainstF32Reference) {
  for (const Case& c : kCases) {
    for (int32_t hd : {32, 64}) {
      Err e = measure(c.p, hd);
      std::printf("%-16s hd %3d  max abs err %.3g  mean abs err %.3g\n", c.name, hd, e.max, e.mean);
      EXPECT_LE(e.max, c.max_bound) << c.name << " hd " << hd;
      EXPECT_LE(e.mean, c.mean_bound) << c.name << " hd " << hd;
    }
  }
}

TEST(KvAttentionTest, CompactTypesAreReallyCompact) {
  // A test that cannot fail is a defect: int4 must be measurably worse than int8, int8 than f16.
  Err f16 = measure({KvType::kF16, 0, KvType::kF16}, 64);
  Err i8 = measure({KvType::kInt8, 0, KvType::kInt8}, 64);
  Err i4 = measure({KvType::kInt4, 0, KvType::kInt4}, 64);
  EXPECT_GT(i8.mean, 2 * f16.mean);
  EXPECT_GT(i4.mean, 2 * i8.mean);
  Err mixed = measure({KvType::kF16, 64, KvType::kInt4}, 64);
  EXPECT_LT(mixed.mean, i4.mean);
}

TEST(KvAttentionTest, F16BitIdenticalAcrossBlockSizes) {
  Data d = random_data(32, 600, 9);
  std::vector<std::vector<float>> outs;
  for (int32_t bt : {16, 64, 256}) {
    std::vector<BlockRef> table;
    auto kv = fill(d, {KvType::kF16, 0, KvType::kF16}, bt, &table);
    AttnScratch scratch;
    std::vector<float> all;
    std::vector<float> out(d.hd);
    for (int64_t pos : {0, 15, 16, 100, 255, 256, 299, 511, 599}) {
      for (int32_t h = 0; h < d.heads; ++h) {
        attend(*kv, table.data(), 0, h, d.q.data(), pos, out.data(), &scratch);
        all.insert(all.end(), out.begin(), out.end());
      }
    }
    outs.push_back(all);
  }
  EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4));
  EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[2].data(), outs[0].size() * 4));
}

// What a cache of `kv` types makes of the data, as plain numbers: every row rounded to f16 (how
// rows are written), then, in blocks before `exact_block`, K and V each through their own codec
// (a whole block per head, as the cache encodes them). Attention over this through an f32 cache
// must match attention through the compact cache up to f32 rounding.
Data as_stored(const Data& d, KvTypePair kv, int32_t bt, int32_t exact_block) {
  Data r = d;
  for (auto* x : {&r.k, &r.v}) {
    for (float& f : *x) f = f16_to_f32(f32_to_f16(f));
  }
  std::vector<float> rows(static_cast<size_t>(bt) * d.hd), back(rows.size());
  for (int32_t st = 0; st < 2; ++st) {
    const kernels::KvCodec c = kv[st];
    std::vector<uint8_t> elems(bt * kernels::kv_row_elem_bytes(c, d.hd));
    std::vector<uint8_t> scales(kernels::kv_head_scale_bytes(c, d.hd) + bt * kernels::kv_row_scale_bytes(c, d.hd) + 1);
    std::vector<float>& x = st == 0 ? r.k : r.v;
    for (int32_t b = 0; b < exact_block; ++b) {
      for (int32_t h = 0; h < d.heads; ++h) {
        for (int32_t i = 0; i < bt; ++i)
          std::memcpy(&rows[i * d.hd], &x[((b * bt + i) * d.heads + h) * d.hd], sizeof(float) * d.hd);
        kernels::encode_kv_rows(c, rows.data(), bt, d.hd, elems.data(), scales.data());
        kernels::decode_kv_rows(c, elems.data(), scales.data(), bt, d.hd, back.data());
        for (int32_t i = 0; i < bt; ++i)
          std::memcpy(&x[((b * bt + i) * d.heads + h) * d.hd], &back[i * d.hd], sizeof(float) * d.hd);
      }
    }
  }
  return r;
}

TEST(KvAttentionTest, KeysAndValuesAreEachReadInTheirOwnType) {
  const int32_t bt = 16, hd = 32, n = 300, pos = 299;  // the query's own block (18) is read exactly
  const KvTypePair cases[] = {{KvType::kInt4, KvType::kF16}, {KvType::kF16, KvType::kInt4},
                              {KvType::kInt8c, KvType::kInt4c}, {KvType::kInt4c, KvType::kInt8}};
  for (const KvTypePair kv : cases) {
    Data d = random_data(hd, n, 3);
    KvPrecision p{kv.k, 0, kv.k};
    p.hot_v = p.cold_v = kv.v;
    std::vector<BlockRef> table, ref_table;
    auto cache = fill(d, p, bt, &table);
    Data own = as_stored(d, kv, bt, pos / bt), swapped = as_stored(d, {kv.v, kv.k}, bt, pos / bt);
    auto ref_cache = fill(own, {KvType::kF32, 0, KvType::kF32}, bt, &ref_table);
    AttnScratch scratch;
    std::vector<float> got(hd), want(hd);
    double err = 0, err_swapped = 0;
    for (int32_t h = 0; h < d.heads; ++h) {
      attend(*cache, table.data(), 0, h, d.q.data(), pos, got.data(), &scratch);
      attend(*ref_cache, ref_table.data(), 0, h, d.q.data(), pos, want.data(), &scratch);
      auto ref_swapped = reference(swapped, h, pos);
      for (int32_t i = 0; i < hd; ++i) {
        err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
        err_swapped = std::max(err_swapped, std::fabs(got[i] - ref_swapped[i]));
      }
    }
    const std::string name = kv_type_pair_name(kv);
    EXPECT_LE(err, 2e-5) << name;
    // Had K been read in V's codec (or the reverse), the output would be another one.
    EXPECT_GT(err_swapped, 50 * std::max(err, 1e-6)) << name;
  }
}

}  // namespace
}  // namespace hz
