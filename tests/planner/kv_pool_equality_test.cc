// The planner's KV figure equals what the engine's KV pool allocates for the same settings.
// TODO(#6): extend to bf16/fp8/int8/int4 and the hot window once the pool stores them.
#include <gtest/gtest.h>

#include "kv/kv_cache.h"
#include "planner/capacity_plan.h"
#include "kv/kv_layout.h"
#include "model/model_shape.h"
#include "support/test_support.h"

namespace hz {
namespace {

TEST(KvPoolEqualityTest, BlockBytesMatchThePool) {
  auto shape = load_model_shape(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  const KvGeometry g = shape->kv_geometry();
  for (auto [kv, dt] : {std::pair{KvType::kF32, DType::kF32}, std::pair{KvType::kF16, DType::kF16}}) {
    for (int block_tokens : {16, 32, 256}) {
      KvCacheConfig cfg;
      cfg.num_layers = static_cast<int32_t>(shape->num_layers);
      cfg.num_kv_heads = static_cast<int32_t>(shape->num_kv_heads);
      cfg.head_dim = static_cast<int32_t>(shape->head_dim);
      cfg.block_tokens = block_tokens;
      cfg.dtype = dt;
      cfg.num_blocks = 8;
      KvCache cache(cfg);
      EXPECT_EQ(kv_block_bytes(g, kv, block_tokens), cache.block_bytes()) << kv_type_name(kv) << " " << block_tokens;
      EXPECT_EQ(kv_plane_bytes(g, kv, block_tokens), cache.plane_bytes(0));
      EXPECT_EQ(kv_plane_bytes(g, kv, block_tokens), cache.plane_bytes(1));
      // A sequence of n tokens: the planner's bytes = the pool's blocks x block bytes.
      for (int64_t n : {1, 15, 16, 17, 500}) {
        EXPECT_EQ(kv_bytes_for_tokens(g, kv, block_tokens, n), cache.blocks_for(n) * cache.block_bytes());
      }
    }
  }
}

}  // namespace
}  // namespace hz
