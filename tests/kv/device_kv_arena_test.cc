// The device KV arena (on the host emulation of the CUDA backend): its block size is the planner's,
// descriptors address the layout of kv/kv_layout.h, copy-on-write copies whole blocks, the types it
// cannot write are refused, and the KV manager over it refuses the flags the device cache lacks.
#include "kv/device_kv_arena.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kv/kv_layout.h"
#include "kv/kv_manager.h"

namespace hz {
namespace {

DeviceKvArenaConfig config(kernels::KvCodec codec = kernels::KvCodec::kF16) {
  DeviceKvArenaConfig c;
  c.num_layers = 3;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.block_tokens = 16;
  c.num_blocks = 5;
  c.codec = codec;
  return c;
}

TEST(DeviceKvArenaTest, BlockBytesAreThePlannersAndDescriptorsTileTheBlock) {
  auto be = cuda::make_host_backend();
  for (auto [codec, type] : {std::pair{kernels::KvCodec::kF16, KvType::kF16}, std::pair{kernels::KvCodec::kF32, KvType::kF32},
                             std::pair{kernels::KvCodec::kBF16, KvType::kBF16}, std::pair{kernels::KvCodec::kFp8, KvType::kFp8},
                             std::pair{kernels::KvCodec::kInt8, KvType::kInt8}, std::pair{kernels::KvCodec::kInt4, KvType::kInt4}}) {
    auto a = DeviceKvArena::create(config(codec), *be);
    ASSERT_TRUE(a.ok()) << a.status().message();
    KvGeometry g;
    g.num_layers = 3;
    g.num_heads = 2;
    g.head_dim = 64;
    g.fp8_row_scales = true;
    EXPECT_EQ((*a)->block_bytes(), kv_block_bytes(g, type, 16));
    if (codec == kernels::KvCodec::kFp8) {  // one f32 per row: 2 heads x 16 rows more than one per head
      g.fp8_row_scales = false;
      EXPECT_EQ((*a)->block_bytes(), kv_block_bytes(g, type, 16) + 3 * 2 * 2 * 15 * 4);
    }
    EXPECT_EQ((*a)->total_bytes(), 5 * (*a)->block_bytes());
    const device::DeviceKvBlock d = (*a)->descriptor(2);
    EXPECT_EQ(d.k_elems, 2 * (*a)->block_bytes());
    EXPECT_EQ(d.v_elems - d.k_elems, (*a)->block_bytes() / 6);  // one plane of 3 layers x (K, V)
    EXPECT_EQ(d.codec, static_cast<uint32_t>(codec));
    // Zeroed at creation.
    std::vector<uint8_t> bytes((*a)->total_bytes());
    std::memcpy(bytes.data(), (*a)->data(), bytes.size());
    EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; }));
  }
}

TEST(DeviceKvArenaTest, CopyBlockCopiesEveryLayerAndNothingElse) {
  auto be = cuda::make_host_backend();
  auto a = DeviceKvArena::create(config(), *be);
  ASSERT_TRUE(a.ok());
  DeviceKvArena& kv = **a;
  const uint64_t bb = kv.block_bytes();
  for (uint64_t i = 0; i < bb; ++i) kv.data()[1 * bb + i] = static_cast<uint8_t>(i * 7 + 1);
  kv.copy_block(1, 3);
  EXPECT_EQ(std::memcmp(kv.data() + 1 * bb, kv.data() + 3 * bb, bb), 0);
  EXPECT_EQ(kv.data()[4 * bb], 0);
  EXPECT_EQ(kv.data()[3 * bb - 1], 0);
  EXPECT_TRUE(kv.error().ok());
  EXPECT_EQ(kv.finalized_blocks(47), 2);
  EXPECT_TRUE(kv.hot_form_available(0));
  EXPECT_FALSE(kv.spill(0).has_value());
}

TEST(DeviceKvArenaTest, RefusesTypesItCannotWrite) {
  auto be = cuda::make_host_backend();
  for (auto codec : {kernels::KvCodec::kInt8c, kernels::KvCodec::kInt4c, kernels::KvCodec::kInt3, kernels::KvCodec::kInt2}) {
    auto a = DeviceKvArena::create(config(codec), *be);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("--kv-cache-dtype"), std::string::npos) << a.status().message();
  }
  DeviceKvArenaConfig bad = config();
  bad.head_dim = 4;
  EXPECT_FALSE(DeviceKvArena::create(bad, *be).ok());
}

TEST(DeviceKvArenaTest, ManagerRefusesTheFlagsTheDeviceCacheLacks) {
  KvDemand d;
  d.geometry.num_layers = 3;
  d.geometry.num_heads = 2;
  d.geometry.head_dim = 64;
  d.max_num_seqs = 2;
  d.max_model_len = 256;
  d.total_ram_bytes = uint64_t{1} << 30;
  struct Case {
    void (*set)(KvOptions&);
    const char* flag;
  };
  const Case cases[] = {
      {[](KvOptions& o) { o.hot_type = KvType::kInt8c; }, "--kv-cache-dtype int8c"},
      {[](KvOptions& o) { o.hot_type_v = KvType::kInt4c; }, "--kv-cache-dtype-v int4c"},

      {[](KvOptions& o) { o.hot_window = 32; }, "--kv-hot-window"},
      {[](KvOptions& o) { o.disk_dir = "/tmp/x"; }, "--kv-disk-dir"},
      {[](KvOptions& o) {
         o.remote_url = "redis://127.0.0.1:1";
         o.remote_secret = "0123456789abcdef0123";
       },
       "--kv-remote"},
  };
  for (const Case& c : cases) {
    KvOptions o;
    c.set(o);
    auto plan = o.validate(d);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const Status s = KvManager::check_device_options(o, *plan);
    ASSERT_FALSE(s.ok()) << c.flag;
    EXPECT_NE(s.message().find(c.flag), std::string::npos) << s.message();
  }
  // And the plain f16 cache opens, with prefix caching on the host over device blocks.
  KvOptions o;
  o.prefix_caching = true;
  auto plan = o.validate(d);
  ASSERT_TRUE(plan.ok());
  auto be = cuda::make_host_backend();
  KvModelInfo m;
  m.num_layers = 3;
  m.num_kv_heads = 2;
  m.head_dim = 64;
  m.identity = "test";
  auto k = KvManager::open_device(o, *plan, m, *be);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ((*k)->cache(), nullptr);
  ASSERT_NE((*k)->device_arena(), nullptr);
  EXPECT_NE((*k)->prefix_cache(), nullptr);
  EXPECT_EQ((*k)->pool().num_blocks(), plan->num_blocks);
}

}  // namespace
}  // namespace hz
