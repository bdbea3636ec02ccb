// RemoteTier between two "replicas" (KV caches with their own prefix caches, per-process hash
// seeds) and one real redis-server: a sequence's blocks written behind on one are promoted on the
// other byte for byte and matched by its prefix cache; a chain is fetched only past the RAM hits;
// promotion stops when the pool has no room; after Redis restarts, blocks are written again.
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "kv/kv_cache.h"
#include "kv/prefix_cache.h"
#include "kv/remote_tier.h"
#include "support/service_process.h"

namespace hz {
namespace {

using namespace std::chrono_literals;

#define REQUIRE_SERVICE(srv)                                  \
  do {                                                        \
    if (!(srv).ok()) {                                        \
      if (test::services_required()) FAIL() << (srv).error(); \
      GTEST_SKIP() << (srv).error();                          \
    }                                                         \
  } while (0)

constexpr int32_t kBt = 16;

struct Replica {
  KvCache kv;
  PrefixCache cache;
  RemoteTier tier;
  Replica(const std::string& url, int32_t num_blocks, std::optional<KvPrecision> p = std::nullopt)
      : kv(config(num_blocks, p)), cache(kv.pool(), kBt, "model"), tier(kv, cache, open_store(url, kv), 2000ms) {}

  static KvCacheConfig config(int32_t num_blocks, std::optional<KvPrecision> p = std::nullopt) {
    KvCacheConfig c;
    c.precision = p;
    c.num_layers = 2;
    c.num_kv_heads = 2;
    c.head_dim = 32;
    c.block_tokens = kBt;
    c.dtype = DType::kF16;
    c.num_blocks = num_blocks;
    return c;
  }
  static std::unique_ptr<kvstore::RedisStore> open_store(const std::string& url, const KvCache& kv) {
    kvstore::RemoteOptions o;
    o.url = url;
    o.secret = "0123456789abcdef0123";
    o.fingerprint = kvstore::Fingerprint{7, 9};
    o.block_tokens = kBt;
    o.block_bytes = kv.block_bytes();
    o.kv_type = kv_type_pair_code(kv.arena_types());
    o.reconnect_ms = 100;
    auto s = kvstore::RedisStore::open(o);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return std::move(*s);
  }

  // A finished sequence over `tokens`: every full block allocated, filled from `seed`, registered.
  KvSeq compute(const std::vector<int32_t>& tokens, uint32_t seed) {
    KvSeq s;
    s.tokens = tokens;
    std::mt19937 rng(seed);
    uint64_t parent = 0;
    for (size_t j = 0; j < tokens.size() / kBt; ++j) {
      const int32_t b = *kv.pool().allocate();
      uint8_t* p = kv.block_data_mut(b);
      for (uint64_t i = 0; i < kv.block_bytes(); ++i) p[i] = static_cast<uint8_t>(rng());
      const uint64_t h = cache.chain_hash(parent, tokens.data() + j * kBt);
      cache.insert(h, b, tokens.data() + j * kBt, parent);
      s.block_table.push_back(BlockRef::pool(b));
      s.block_hashes.push_back(h);
      parent = h;
    }
    s.num_computed = static_cast<int64_t>(tokens.size());
    return s;
  }
  void release(KvSeq& s) {
    tier.offer(s);
    for (BlockRef b : s.block_table) kv.pool().unref(b.idx);
    s.block_table.clear();
  }
};

std::vector<int32_t> tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % 1000);
  return t;
}

TEST(RemoteTierTest, BlocksWrittenOnOneReplicaArePromotedOnAnotherByteForByte) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  Replica a(redis.url(), 32), b(redis.url(), 32);
  const std::vector<int32_t> t = tokens(10 * kBt, 1);
  KvSeq s = a.compute(t, 42);
  std::vector<std::vector<uint8_t>> want;
  for (BlockRef blk : s.block_table) want.emplace_back(a.kv.block_data(blk.idx), a.kv.block_data(blk.idx) + a.kv.block_bytes());
  a.release(s);
  EXPECT_EQ(a.tier.stats().offered, 10u);
  ASSERT_TRUE(a.tier.store().flush(5s));
  EXPECT_EQ(a.tier.store().stats().writes, 10u);
  a.release(s);  // offered again: nothing new is written
  EXPECT_EQ(a.tier.stats().offered, 10u);

  EXPECT_EQ(b.tier.promote_prefix(t.data(), 10), 10);
  const PrefixCache::Match m = b.cache.match(t.data(), 10);
  ASSERT_EQ(m.blocks.size(), 10u);
  for (size_t j = 0; j < 10; ++j) EXPECT_EQ(std::memcmp(b.kv.block_data(m.blocks[j]), want[j].data(), want[j].size()), 0) << j;
  // Again: every block is a RAM hit, Redis is not asked.
  const uint64_t fetches = b.tier.store().stats().fetches;
  EXPECT_EQ(b.tier.promote_prefix(t.data(), 10), 0);
  EXPECT_EQ(b.tier.store().stats().fetches, fetches);
  // A prompt that diverges after 4 blocks: those 4 are RAM hits, the rest is not in Redis.
  std::vector<int32_t> other = t;
  other[4 * kBt + 3] += 1;
  EXPECT_EQ(b.tier.promote_prefix(other.data(), 10), 0);
}

// Keys and values in different types: a record holds both planes of every layer and comes back
// byte for byte; a replica storing the same sizes the other way round (K int4 / V int8) never
// takes it, even under the same fingerprint: the record's type byte names both types.
TEST(RemoteTierTest, SeparateKeyAndValueTypesTravelWholeAndOnlyToTheirOwnLayout) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  KvPrecision k8v4{KvType::kInt8, 0, KvType::kInt8};
  k8v4.hot_v = k8v4.cold_v = KvType::kInt4;
  KvPrecision k4v8{KvType::kInt4, 0, KvType::kInt4};
  k4v8.hot_v = k4v8.cold_v = KvType::kInt8;
  Replica a(redis.url(), 32, k8v4), b(redis.url(), 32, k8v4), c(redis.url(), 32, k4v8);
  ASSERT_EQ(a.kv.block_bytes(), c.kv.block_bytes());
  const std::vector<int32_t> t = tokens(4 * kBt, 3);
  KvSeq s = a.compute(t, 5);
  std::vector<std::vector<uint8_t>> want;
  for (BlockRef blk : s.block_table) want.emplace_back(a.kv.block_data(blk.idx), a.kv.block_data(blk.idx) + a.kv.block_bytes());
  a.release(s);
  ASSERT_TRUE(a.tier.store().flush(5s));
  EXPECT_EQ(c.tier.promote_prefix(t.data(), 4), 0);
  EXPECT_EQ(b.tier.promote_prefix(t.data(), 4), 4);
  const PrefixCache::Match m = b.cache.match(t.data(), 4);
  ASSERT_EQ(m.blocks.size(), 4u);
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(std::memcmp(b.kv.block_data(m.blocks[j]), want[j].data(), want[j].size()), 0) << j;
}

TEST(RemoteTierTest, PromotionStopsWhenThePoolIsFull) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  Replica a(redis.url(), 32), b(redis.url(), 4);
  const std::vector<int32_t> t = tokens(10 * kBt, 2);
  KvSeq s = a.compute(t, 7);
  a.release(s);
  ASSERT_TRUE(a.tier.store().flush(5s));
  EXPECT_EQ(b.tier.promote_prefix(t.data(), 10), 4);  // as many as fit
  EXPECT_EQ(b.cache.match(t.data(), 10).blocks.size(), 4u);
}

TEST(RemoteTierTest, BlocksAreWrittenAgainAfterRedisLostThem) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  Replica a(redis.url(), 32);
  const std::vector<int32_t> t = tokens(6 * kBt, 3);
  KvSeq s = a.compute(t, 9);
  KvSeq keep = s;  // a second user of the same blocks, released after the restart
  for (BlockRef blk : keep.block_table) a.kv.pool().acquire(blk.idx);
  a.release(s);
  ASSERT_TRUE(a.tier.store().flush(5s));
  ASSERT_TRUE(redis.restart());  // empty now
  const auto end = std::chrono::steady_clock::now() + 10s;
  a.tier.promote_prefix(t.data(), 1);  // notices nothing (RAM hit); the writer reconnects by itself
  while (a.tier.store().stats().epoch == 0 && std::chrono::steady_clock::now() < end) {
    (void)a.tier.store().enqueue(kvstore::ChainKey{}, kvstore::ChainKey{}, t.data(), a.kv.block_data(keep.block_table[0].idx));
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(a.tier.store().stats().epoch, 1u);
  a.release(keep);  // the outage cleared what A believed was in Redis: written again
  ASSERT_TRUE(a.tier.store().flush(5s));
  Replica b(redis.url(), 32);
  EXPECT_EQ(b.tier.promote_prefix(t.data(), 6), 6);
}

}  // namespace
}  // namespace hz
