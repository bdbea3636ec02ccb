// KvOptions::validate for the remote tier: a URL needs a secret (16+ characters), implies prefix
// caching, and is off with a hot window (a warning naming both flags).
#include <gtest/gtest.h>

#include "kv/kv_options.h"

namespace hz {
namespace {

KvDemand demand() {
  KvDemand d;
  d.geometry.num_layers = 2;
  d.geometry.num_heads = 2;
  d.geometry.head_dim = 64;
  d.max_num_seqs = 4;
  d.max_model_len = 1024;
  d.prefill_chunk = 64;
  d.total_ram_bytes = uint64_t{16} << 30;
  return d;
}

TEST(KvRemoteOptionsTest, RefusesAUrlWithoutASecret) {
  KvOptions o;
  o.remote_url = "redis://127.0.0.1:6379";
  auto p = o.validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-remote-secret"), std::string::npos);
  EXPECT_NE(p.status().message().find("HORIZON_KV_REMOTE_SECRET"), std::string::npos);
  o.remote_secret = "too short";
  p = o.validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("at least 16"), std::string::npos);
}

TEST(KvRemoteOptionsTest, ImpliesPrefixCaching) {
  KvOptions o;
  auto off = o.validate(demand());
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->remote_tier);
  EXPECT_FALSE(off->prefix_caching);
  o.remote_url = "unix:///run/redis.sock";
  o.remote_secret = "0123456789abcdef";
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->remote_tier);
  EXPECT_TRUE(p->prefix_caching);
  o.remote_timeout_ms = 0;
  EXPECT_FALSE(o.validate(demand()).ok());
}

TEST(KvRemoteOptionsTest, IsOffWithAHotWindow) {
  KvOptions o;
  o.remote_url = "redis://127.0.0.1:6379";
  o.remote_secret = "0123456789abcdef";
  o.hot_window = 256;
  o.hot_type = KvType::kF16;
  o.cold_type = KvType::kInt8;
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->remote_tier);
  bool warned = false;
  for (const auto& w : p->warnings) warned |= w.find("--kv-remote with --kv-hot-window") != std::string::npos;
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace hz
