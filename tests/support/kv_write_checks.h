// The paged KV write (cuda::kv_write) on any backend of kernels/cuda/backend.h, against rows encoded
// by the scalar codec one row at a time (int8/int4 with their group scales, fp8 with one scale per
// row) at the positions the block tables give: used by tests/cuda (the GPU kernel) and tests/kernels
// (its host form). Bytes outside the written rows must stay untouched.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/kv_block_table.h"
#include "kernels/kv_codec.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::test {

inline void check_kv_write(cuda::Backend& be, kernels::KvCodec codec, int32_t head_dim) {
  constexpr int32_t kKvHeads = 3, kBlockTokens = 16, kLayers = 2, kLayer = 1;
  device::ArenaGeometry geo;
  geo.num_layers = kLayers;
  geo.num_kv_heads = kKvHeads;
  geo.head_dim = head_dim;
  geo.block_tokens = kBlockTokens;
  geo.codec = codec;
  constexpr int64_t kNumBlocks = 12;
  std::vector<uint8_t> arena(static_cast<size_t>(kNumBlocks * geo.block_bytes()));
  std::mt19937 rng(head_dim * 7 + static_cast<int>(codec));
  for (auto& b : arena) b = static_cast<uint8_t>(rng());
  std::vector<int64_t> ids(kNumBlocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  // Two sequences: 5 blocks and 4 blocks; the step writes positions 60..79 of the first (a block
  // boundary crossed) and 3 of the second (a decode).
  std::vector<std::vector<device::DeviceKvBlock>> tables(2);
  for (int b = 0; b < 5; ++b) tables[0].push_back(device::arena_block_descriptor(geo, ids[b]));
  for (int b = 0; b < 4; ++b) tables[1].push_back(device::arena_block_descriptor(geo, ids[5 + b]));
  std::vector<int32_t> qseq;
  std::vector<int64_t> qpos;
  for (int64_t p = 60; p < 80; ++p) {
    qseq.push_back(0);
    qpos.push_back(p);
  }
  qseq.push_back(1);
  qpos.push_back(50);
  auto up = device::build_attention_upload(tables, qseq, qpos, kBlockTokens, 0, 1);
  ASSERT_TRUE(up.ok()) << up.status().message();
  const int64_t n = static_cast<int64_t>(qpos.size());
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> k(n * kKvHeads * head_dim), v(k.size());
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  k[5] = std::numeric_limits<float>::infinity();  // edge values go through the codec as in the reference
  v[7] = std::numeric_limits<float>::quiet_NaN();
  k[9] = 1e-30f;
  std::fill(v.begin() + head_dim, v.begin() + 2 * head_dim, 0.0f);  // a zero row: scale 0
  v[2 * head_dim + 1] = -40.0f;                                      // a row whose largest value is negative

  auto put = [&](const void* src, uint64_t bytes) {
    auto m = be.allocate(std::max<uint64_t>(bytes, 1), "test array");
    EXPECT_TRUE(m.ok()) << m.status().message();
    EXPECT_TRUE(be.upload(m->data(), src, bytes).ok());
    EXPECT_TRUE(be.synchronize().ok());
    return std::move(m).value();
  };
  cuda::DeviceMemory darena = put(arena.data(), arena.size()), dup = put(up->bytes.data(), up->bytes.size()),
                     dk = put(k.data(), 4 * k.size()), dv = put(v.data(), 4 * v.size());
  cuda::KvWriteArgs a;
  a.codec = codec;
  a.arena = darena.as<uint8_t>();
  a.layer_offset = static_cast<uint64_t>(geo.layer_offset(kLayer));
  const uint8_t* base = dup.as<uint8_t>();
  a.blocks = reinterpret_cast<const device::DeviceKvBlock*>(base + up->blocks_offset);
  a.seq_block_begin = reinterpret_cast<const int64_t*>(base + up->seq_block_begin_offset);
  a.query_seq = reinterpret_cast<const int32_t*>(base + up->query_seq_offset);
  a.query_pos = reinterpret_cast<const int64_t*>(base + up->query_pos_offset);
  a.num_tokens = n;
  a.num_kv_heads = kKvHeads;
  a.head_dim = head_dim;
  a.block_tokens = kBlockTokens;
  a.k = dk.as<float>();
  a.v = dv.as<float>();
  Status s = be.kv_write(a);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<uint8_t> got(arena.size());
  ASSERT_TRUE(be.download(got.data(), darena.data(), got.size()).ok());

  std::vector<uint8_t> want = arena;
  const int64_t reb = kernels::kv_row_elem_bytes(codec, head_dim), rsb = device::arena_row_scale_bytes(codec, head_dim);
  for (int64_t t = 0; t < n; ++t) {
    const device::DeviceKvBlock& d = tables[qseq[t]][qpos[t] / kBlockTokens];
    for (int32_t h = 0; h < kKvHeads; ++h) {
      const int64_t row = static_cast<int64_t>(h) * kBlockTokens + qpos[t] % kBlockTokens;
      for (int st = 0; st < 2; ++st) {
        const float* x = (st == 0 ? k.data() : v.data()) + (t * kKvHeads + h) * head_dim;
        uint8_t* dst = want.data() + (st == 0 ? d.k_elems : d.v_elems) + geo.layer_offset(kLayer) + row * reb;
        uint8_t* sc = want.data() + (st == 0 ? d.k_scales : d.v_scales) + geo.layer_offset(kLayer) + row * rsb;
        kernels::ref::encode_kv_rows(codec, x, 1, head_dim, dst, sc);
      }
    }
  }
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "arena byte " << i;
}

}  // namespace hz::test
