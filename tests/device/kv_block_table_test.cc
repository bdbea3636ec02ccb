// The provisional device KV arena layout and the one-copy attention upload: plane sizes agree with
// the planner's, descriptors point where kv_layout.h says, the upload's arrays sit at aligned
// offsets with the right contents, query blocks and segment counts follow positions, and bad
// tables are errors naming the query or sequence.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cuda/kv_block_table.h"
#include "kernels/cuda/launch.h"
#include "kv/kv_layout.h"

namespace hz::device {
namespace {

using kernels::KvCodec;

template <typename T>
std::vector<T> read_array(const AttentionUpload& u, int64_t offset, size_t n) {
  std::vector<T> v(n);
  std::memcpy(v.data(), u.bytes.data() + offset, n * sizeof(T));
  return v;
}

TEST(KvBlockTableTest, PlaneBytesMatchThePlanner) {
  const std::pair<KvCodec, KvType> types[] = {{KvCodec::kF32, KvType::kF32},   {KvCodec::kF16, KvType::kF16},
                                              {KvCodec::kBF16, KvType::kBF16}, {KvCodec::kFp8, KvType::kFp8},
                                              {KvCodec::kInt8, KvType::kInt8}, {KvCodec::kInt4, KvType::kInt4}};
  for (auto [codec, type] : types) {
    for (int64_t hd : {8, 20, 64, 128, 256}) {
      ArenaGeometry g{32, 8, hd, 16, codec};
      ASSERT_TRUE(g.validate().ok());
      KvGeometry kg;
      kg.num_layers = 32;
      kg.num_heads = 8;
      kg.head_dim = static_cast<uint64_t>(hd);
      kg.fp8_row_scales = true;  // the device layout: fp8 scales per row
      EXPECT_EQ(static_cast<uint64_t>(g.plane_bytes()), kv_plane_bytes(kg, type, 16)) << kv_type_name(type) << " hd " << hd;
      EXPECT_EQ(static_cast<uint64_t>(g.block_bytes()), kv_block_bytes(kg, type, 16)) << kv_type_name(type) << " hd " << hd;
    }
  }
}

TEST(KvBlockTableTest, DescriptorsFollowTheLayout) {
  ArenaGeometry g{4, 2, 64, 16, KvCodec::kInt8};
  const int64_t plane = g.plane_bytes(), elems = g.plane_elem_bytes();
  EXPECT_EQ(elems, 2 * 16 * 64);
  EXPECT_EQ(plane, elems + 2 * 16 * 2 * 2);  // two f16 scales per row of 64
  const DeviceKvBlock d = arena_block_descriptor(g, 5);
  EXPECT_EQ(d.k_elems, static_cast<uint64_t>(5 * g.block_bytes()));
  EXPECT_EQ(d.v_elems, d.k_elems + plane);
  EXPECT_EQ(d.k_scales, d.k_elems + elems);
  EXPECT_EQ(d.v_scales, d.v_elems + elems);
  EXPECT_EQ(d.codec, static_cast<uint32_t>(KvCodec::kInt8));
  EXPECT_EQ(g.layer_offset(3), 3 * 2 * plane);
  // 64-bit offsets: a block past 4 GiB keeps its offset.
  const DeviceKvBlock far = arena_block_descriptor(ArenaGeometry{32, 8, 128, 16, KvCodec::kF16}, 70000);
  EXPECT_EQ(far.k_elems, uint64_t{70000} * 32 * 2 * 8 * 16 * 128 * 2);
  EXPECT_FALSE((ArenaGeometry{4, 2, 7, 16, KvCodec::kF16}.validate().ok()));
  EXPECT_FALSE((ArenaGeometry{0, 2, 64, 16, KvCodec::kF16}.validate().ok()));
}

TEST(KvBlockTableTest, UploadLaysOutArraysAlignedWithTheirContents) {
  ArenaGeometry g{2, 2, 64, 16, KvCodec::kF16};
  std::vector<std::vector<DeviceKvBlock>> tables(3);
  for (int b = 0; b < 2; ++b) tables[0].push_back(arena_block_descriptor(g, 10 + b));
  for (int b = 0; b < 70; ++b) tables[1].push_back(arena_block_descriptor(g, 100 + b));
  tables[2].push_back(arena_block_descriptor(g, 7));
  // Sequence 1: a prefill of 20 consecutive queries 1000..1019; then decodes of 0 and 2.
  std::vector<int32_t> qseq;
  std::vector<int64_t> qpos;
  for (int i = 0; i < 20; ++i) qseq.push_back(1), qpos.push_back(1000 + i);
  qseq.push_back(0), qpos.push_back(31);
  qseq.push_back(2), qpos.push_back(0);
  auto u = build_attention_upload(tables, qseq, qpos, 16, 0, 16);
  ASSERT_TRUE(u.ok()) << u.status().message();
  for (int64_t off : {u->blocks_offset, u->seq_block_begin_offset, u->query_seq_offset, u->query_pos_offset, u->qblock_first_offset})
    EXPECT_EQ(off % AttentionUpload::kUploadAlign, 0);
  EXPECT_EQ(u->bytes.size() % AttentionUpload::kUploadAlign, 0u);
  EXPECT_EQ(u->num_seqs, 3);
  EXPECT_EQ(u->num_queries, 22);
  const auto begin = read_array<int64_t>(*u, u->seq_block_begin_offset, 4);
  EXPECT_EQ(begin, (std::vector<int64_t>{0, 2, 72, 73}));
  const auto blocks = read_array<DeviceKvBlock>(*u, u->blocks_offset, 73);
  EXPECT_EQ(blocks[2].k_elems, tables[1][0].k_elems);
  EXPECT_EQ(blocks[72].v_scales, tables[2][0].v_scales);
  EXPECT_EQ(read_array<int64_t>(*u, u->query_pos_offset, 22), qpos);
  EXPECT_EQ(read_array<int32_t>(*u, u->query_seq_offset, 22), qseq);
  // Query blocks: 16 + 4 of sequence 1, then one each for sequences 0 and 2.
  EXPECT_EQ(u->num_qblocks, 4);
  EXPECT_EQ(read_array<int32_t>(*u, u->qblock_first_offset, 5), (std::vector<int32_t>{0, 16, 20, 21, 22}));
  // Positions 1000..1019 lie in segment 1 (512..1023): one segment per block.
  EXPECT_EQ(u->max_segments, 2);  // [0, 1]: keys from 0 to 1015 span two segments
}

TEST(KvBlockTableTest, SegmentsFollowPositionsAndWindows) {
  ArenaGeometry g{1, 1, 64, 16, KvCodec::kF16};
  std::vector<std::vector<DeviceKvBlock>> tables(1);
  for (int b = 0; b < 200; ++b) tables[0].push_back(arena_block_descriptor(g, b));
  auto at = [&](int64_t pos, int64_t window) {
    auto u = build_attention_upload(tables, {0}, {pos}, 16, window, 1);
    EXPECT_TRUE(u.ok());
    return u->max_segments;
  };
  EXPECT_EQ(at(0, 0), 1);
  EXPECT_EQ(at(511, 0), 1);
  EXPECT_EQ(at(512, 0), 2);
  EXPECT_EQ(at(3199, 0), 7);
  EXPECT_EQ(at(3199, 512), 2);   // keys 2688..3199: segments 5 and 6
  EXPECT_EQ(at(3071, 512), 1);   // keys 2560..3071: segment 5 only
  EXPECT_EQ(cuda::attention_first_segment(3199, 512), 5);
  EXPECT_EQ(cuda::attention_last_segment(3199), 6);
  // A prefill block spanning a segment boundary covers both segments.
  std::vector<int32_t> qseq(16, 0);
  std::vector<int64_t> qpos;
  for (int i = 0; i < 16; ++i) qpos.push_back(1016 + i);
  auto u = build_attention_upload(tables, qseq, qpos, 16, 100, 16);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->max_segments, 2);  // first keys from 917 (segment 1), last position 1031 (segment 2)
}

TEST(KvBlockTableTest, BadQueriesAreErrorsNamingThem) {
  ArenaGeometry g{1, 1, 64, 16, KvCodec::kF16};
  std::vector<std::vector<DeviceKvBlock>> tables(2);
  tables[0].push_back(arena_block_descriptor(g, 0));
  tables[1].push_back(arena_block_descriptor(g, 1));
  auto u = build_attention_upload(tables, {0}, {16}, 16, 0, 1);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("position 16"), std::string::npos) << u.status().message();
  u = build_attention_upload(tables, {2}, {0}, 16, 0, 1);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("sequence 2"), std::string::npos) << u.status().message();
  u = build_attention_upload(tables, {0, 1, 0}, {0, 0, 1}, 16, 0, 1);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("not consecutive"), std::string::npos) << u.status().message();
  u = build_attention_upload(tables, {0}, {0, 1}, 16, 0, 1);
  EXPECT_FALSE(u.ok());
  u = build_attention_upload(tables, {0}, {-1}, 16, 0, 1);
  EXPECT_FALSE(u.ok());
}

}  // namespace
}  // namespace hz::device
