// The remote KV store against a real redis-server on a loopback port: records round-trip byte for
// byte; a value overwritten in Redis, a record re-MACed without the secret, a record of another
// fingerprint (under its own name, moved under ours, or MACed with the secret) are never served;
// Redis killed, frozen (SIGSTOP), full: the store degrades, drops writes (counted) and comes back.
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "kvstore/record_mac.h"
#include "kvstore/redis_store.h"
#include "support/service_process.h"

namespace hz::kvstore {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kBlockTokens = 16;
constexpr uint64_t kBlockBytes = 4096;
const char* kSecret = "a secret of the replicas, 32 chars";

#define REQUIRE_SERVICE(srv)                                      \
  do {                                                            \
    if (!(srv).ok()) {                                            \
      if (test::services_required()) FAIL() << (srv).error();     \
      GTEST_SKIP() << (srv).error();                              \
    }                                                             \
  } while (0)

Fingerprint fp(uint64_t v) { return Fingerprint{v, ~v}; }

RemoteOptions options(const std::string& url, const Fingerprint& f = fp(1), const std::string& secret = kSecret) {
  RemoteOptions o;
  o.url = url;
  o.secret = secret;
  o.fingerprint = f;
  o.block_tokens = kBlockTokens;
  o.block_bytes = kBlockBytes;
  o.kv_type = 1;
  o.timeout_ms = 100;
  o.reconnect_ms = 100;
  return o;
}

// A chain of `n` blocks: tokens and payloads derived from `seed`.
struct Chain {
  std::vector<int32_t> tokens;
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<ChainKey> keys;
  Chain(const RedisStore& s, int n, uint32_t seed) {
    std::mt19937 rng(seed);
    tokens.resize(static_cast<size_t>(n) * kBlockTokens);
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 32000);
    ChainKey parent{};
    for (int i = 0; i < n; ++i) {
      payloads.emplace_back(kBlockBytes);
      for (uint8_t& b : payloads.back()) b = static_cast<uint8_t>(rng());
      keys.push_back(s.chain_key(parent, block_tokens(i)));
      parent = keys.back();
    }
  }
  const int32_t* block_tokens(int i) const { return tokens.data() + static_cast<size_t>(i) * kBlockTokens; }
  void write(RedisStore& s) const {
    ChainKey parent{};
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(s.enqueue(keys[i], parent, block_tokens(static_cast<int>(i)), payloads[i].data()));
      parent = keys[i];
    }
    ASSERT_TRUE(s.flush(5s));
  }
  // Blocks fetched and equal to what was written.
  int fetch(RedisStore& s, std::chrono::milliseconds deadline = 2000ms) const {
    int equal = 0;
    s.fetch(keys, [&](int32_t i) { return block_tokens(i); },
            [&](int32_t i, const uint8_t* p) {
              equal += std::memcmp(p, payloads[i].data(), kBlockBytes) == 0 ? 1 : 0;
              return true;
            },
            Clock::now() + deadline);
    return equal;
  }
};

std::unique_ptr<RedisStore> open_store(const RemoteOptions& o) {
  auto s = RedisStore::open(o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

// Raw access to the server, as another client would have.
struct RawClient {
  RedisConnection c;
  explicit RawClient(int port) {
    std::string err;
    RedisAddress a;
    a.host = "127.0.0.1";
    a.port = port;
    c = redis_connect(a, 1000ms, &err);
  }
  std::string get(const std::string& name) {
    auto* r = static_cast<redisReply*>(redisCommand(c.get(), "GET %b", name.data(), name.size()));
    std::string v = r != nullptr && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
    freeReplyObject(r);
    return v;
  }
  void set(const std::string& name, const std::string& v) {
    freeReplyObject(redisCommand(c.get(), "SET %b %b", name.data(), name.size(), v.data(), v.size()));
  }
};

bool wait_until(const std::function<bool()>& f, std::chrono::milliseconds limit = 10s) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

TEST(RedisUrlTest, ParsesHostsSocketsCredentialsAndDatabases) {
  auto a = parse_redis_url("redis://10.0.0.5:6380/3");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "10.0.0.5");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(a->db, 3);
  auto b = parse_redis_url("redis://kv:p@ss@cache.local");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->user, "kv");
  EXPECT_EQ(b->password, "p@ss");
  EXPECT_EQ(b->host, "cache.local");
  EXPECT_EQ(b->port, 6379);
  EXPECT_EQ(b->display().find("p@ss"), std::string::npos);  // never logged
  auto u = parse_redis_url("unix:///run/redis/redis.sock?db=2");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->unix_socket);
  EXPECT_EQ(u->path, "/run/redis/redis.sock");
  EXPECT_EQ(u->db, 2);
  for (const char* bad : {"http://x:1", "redis://", "redis://h:0", "redis://h:99999", "redis://h:1/x", "unix://rel.sock"}) {
    auto r = parse_redis_url(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--kv-remote"), std::string::npos) << r.status().message();
  }
}

TEST(RecordKeysTest, KeysAndMacsDependOnTheSecretAndEveryInput) {
  RecordKeys k(kSecret), other("another secret of 32 characters!");
  std::vector<int32_t> t(kBlockTokens, 7);
  const ChainKey zero{};
  const ChainKey a = k.chain_key(fp(1), zero, t.data(), kBlockTokens);
  EXPECT_NE(a, other.chain_key(fp(1), zero, t.data(), kBlockTokens));
  EXPECT_NE(a, k.chain_key(fp(2), zero, t.data(), kBlockTokens));
  EXPECT_NE(a, k.chain_key(fp(1), a, t.data(), kBlockTokens));
  t[3] = 8;
  EXPECT_NE(a, k.chain_key(fp(1), zero, t.data(), kBlockTokens));
  std::vector<uint8_t> rec(100, 5);
  const Mac m = k.mac("name", rec.data(), rec.size());
  EXPECT_TRUE(k.verify("name", rec.data(), rec.size(), m.data()));
  EXPECT_FALSE(k.verify("nam", rec.data(), rec.size(), m.data()));
  EXPECT_FALSE(other.verify("name", rec.data(), rec.size(), m.data()));
  rec[50] ^= 1;
  EXPECT_FALSE(k.verify("name", rec.data(), rec.size(), m.data()));
}

TEST(RedisStoreTest, RefusesToOpenWithoutASecret) {
  auto s = RedisStore::open(options("redis://127.0.0.1:1", fp(1), ""));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("HORIZON_KV_REMOTE_SECRET"), std::string::npos);
}

TEST(RedisStoreTest, RoundTripsBlocksByteForByte) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  auto w = open_store(options(redis.url()));
  auto r = open_store(options(redis.url()));  // another replica
  ASSERT_TRUE(w && r);
  EXPECT_FALSE(w->degraded());
  Chain c(*w, 20, 1);
  c.write(*w);
  EXPECT_EQ(w->stats().writes, 20u);
  EXPECT_EQ(c.fetch(*r), 20);
  const RemoteStats st = r->stats();
  EXPECT_EQ(st.hits, 20u);
  EXPECT_EQ(st.corrupt, 0u);
  EXPECT_GE(st.read_bytes, 20 * (kBlockBytes + kBlockTokens * 4 + kRecordHeaderBytes + kMacBytes));
  // A longer prompt whose chain continues past what is stored: the stored prefix, then a miss.
  Chain longer(*w, 20, 1);
  EXPECT_EQ(longer.fetch(*r), 20);
}

TEST(RedisStoreTest, CompressedRecordsRoundTrip) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  RemoteOptions o = options(redis.url());
  o.codec = Codec::kZstd;
  auto s = open_store(o);
  ASSERT_TRUE(s);
  Chain c(*s, 6, 8);
  for (auto& p : c.payloads) {
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(p[i] & 0x3);  // compressible
  }
  c.write(*s);
  const uint64_t raw = 6 * (kRecordHeaderBytes + 4 * kBlockTokens + kBlockBytes + kMacBytes);
  EXPECT_LT(s->stats().write_bytes, raw);  // smaller on the wire and in Redis
  EXPECT_EQ(c.fetch(*s), 6);
  EXPECT_EQ(s->stats().corrupt, 0u);
}

TEST(RedisStoreTest, ValueOverwrittenInRedisIsNeverServed) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  auto s = open_store(options(redis.url()));
  ASSERT_TRUE(s);
  Chain c(*s, 8, 2);
  c.write(*s);
  // One byte of block 3's payload changed with redis-cli: the chain is served up to block 3.
  const std::string name = s->name(c.keys[3]);
  ASSERT_EQ(redis.cli("SETRANGE " + name + " 500 X"), std::to_string(kRecordHeaderBytes + 4 * kBlockTokens + kBlockBytes + kMacBytes));
  EXPECT_EQ(c.fetch(*s), 3);
  EXPECT_EQ(s->stats().corrupt, 1u);
  // A value replaced wholesale (garbage) is refused too.
  redis.cli("SET " + s->name(c.keys[0]) + " garbage");
  EXPECT_EQ(c.fetch(*s), 0);
  EXPECT_EQ(s->stats().corrupt, 2u);
}

TEST(RedisStoreTest, RecordWithValidChecksumButWrongMacIsNeverServed) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  auto s = open_store(options(redis.url()));
  ASSERT_TRUE(s);
  Chain c(*s, 4, 3);
  c.write(*s);
  RawClient raw(redis.port());
  ASSERT_TRUE(raw.c);
  // Someone without the secret rewrites block 1: new payload, correct checksum, a MAC of their own.
  const std::string name = s->name(c.keys[1]);
  std::string v = raw.get(name);
  ASSERT_EQ(v.size(), kRecordHeaderBytes + 4 * kBlockTokens + kBlockBytes + kMacBytes);
  auto rec = parse_record(reinterpret_cast<const uint8_t*>(v.data()), v.size() - kMacBytes, fp(1));
  ASSERT_TRUE(rec.ok());
  std::vector<uint8_t> poisoned(kBlockBytes, 0x42);
  std::string forged(v.size() - kMacBytes, '\0');
  write_record(rec->meta, c.block_tokens(1), poisoned.data(), reinterpret_cast<uint8_t*>(forged.data()));
  ASSERT_TRUE(parse_record(reinterpret_cast<const uint8_t*>(forged.data()), forged.size(), fp(1)).ok());  // checksum valid
  const Mac m = RecordKeys("not the replicas' secret, 32 chr").mac(name, reinterpret_cast<const uint8_t*>(forged.data()), forged.size());
  raw.set(name, forged + std::string(reinterpret_cast<const char*>(m.data()), m.size()));
  EXPECT_EQ(c.fetch(*s), 1);
  EXPECT_EQ(s->stats().corrupt, 1u);
  // With no MAC at all (a record as the disk store writes it): refused as well.
  raw.set(name, forged);
  EXPECT_EQ(c.fetch(*s), 1);
  EXPECT_EQ(s->stats().corrupt, 2u);
}

TEST(RedisStoreTest, RecordOfAnotherFingerprintIsNeverServed) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  auto mine = open_store(options(redis.url(), fp(1)));
  auto other = open_store(options(redis.url(), fp(2)));  // another model, same secret
  ASSERT_TRUE(mine && other);
  Chain theirs(*other, 4, 4);
  theirs.write(*other);
  Chain same_tokens(*mine, 4, 4);  // the same prompt under our fingerprint: other names, a miss
  EXPECT_EQ(same_tokens.fetch(*mine), 0);
  EXPECT_EQ(mine->stats().misses, 1u);
  RawClient raw(redis.port());
  ASSERT_TRUE(raw.c);
  // Their genuine record moved under our name: the MAC binds the name.
  const std::string v = raw.get(other->name(theirs.keys[0]));
  ASSERT_FALSE(v.empty());
  const std::string ours = mine->name(same_tokens.keys[0]);
  raw.set(ours, v);
  EXPECT_EQ(same_tokens.fetch(*mine), 0);
  EXPECT_EQ(mine->stats().corrupt, 1u);
  // Re-MACed under our name with the secret (a replica of the other model would have to be
  // compromised): the fingerprint inside the record still differs.
  const std::string rec = v.substr(0, v.size() - kMacBytes);
  const Mac m = RecordKeys(kSecret).mac(ours, reinterpret_cast<const uint8_t*>(rec.data()), rec.size());
  raw.set(ours, rec + std::string(reinterpret_cast<const char*>(m.data()), m.size()));
  EXPECT_EQ(same_tokens.fetch(*mine), 0);
  EXPECT_EQ(mine->stats().corrupt, 2u);
}

TEST(RedisStoreTest, KilledRedisDegradesThenRecoversWithoutRestart) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  auto s = open_store(options(redis.url()));
  ASSERT_TRUE(s);
  Chain c(*s, 4, 5);
  c.write(*s);
  redis.kill_now();
  EXPECT_EQ(c.fetch(*s), 0);  // the call fails: degraded
  EXPECT_TRUE(s->degraded());
  EXPECT_EQ(c.fetch(*s), 0);  // and the next one does not even ask
  const uint64_t errors = s->stats().errors;
  EXPECT_GE(errors, 1u);
  // Writes while down are dropped and counted, never queued without bound.
  EXPECT_TRUE(wait_until([&] { return !s->enqueue(c.keys[0], ChainKey{}, c.block_tokens(0), c.payloads[0].data()); }));
  EXPECT_GE(s->stats().dropped_writes, 1u);
  ASSERT_TRUE(redis.restart()) << redis.error();
  ASSERT_TRUE(wait_until([&] { return !s->degraded(); })) << "no reconnect";
  EXPECT_EQ(s->stats().epoch, 1u);
  EXPECT_EQ(s->stats().reconnects, 1u);
  EXPECT_EQ(c.fetch(*s), 0);  // a restarted Redis has lost the records (no persistence here)
  c.write(*s);
  EXPECT_EQ(c.fetch(*s), 4);  // hits again
}

TEST(RedisStoreTest, FrozenRedisTimesOutInsteadOfBlocking) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  auto s = open_store(options(redis.url()));
  ASSERT_TRUE(s);
  Chain c(*s, 4, 6);
  c.write(*s);
  redis.freeze();
  const auto t0 = Clock::now();
  EXPECT_EQ(c.fetch(*s, 300ms), 0);
  // Bounded by the call timeout (100 ms); the bound asserted is generous (a loaded machine).
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_TRUE(s->degraded());
  // Writes during the freeze do not block the caller either.
  for (int i = 0; i < 100; ++i) (void)s->enqueue(c.keys[0], ChainKey{}, c.block_tokens(0), c.payloads[0].data());
  EXPECT_LT(Clock::now() - t0, 3s);
  redis.thaw();
  ASSERT_TRUE(wait_until([&] { return !s->degraded(); })) << "no reconnect after SIGCONT";
  EXPECT_EQ(c.fetch(*s), 4);  // the records survived the freeze
}

TEST(RedisStoreTest, FullRedisRefusesWritesWhichAreCountedAsDropped) {
  test::RedisServer redis({"maxmemory 1mb", "maxmemory-policy noeviction"});
  REQUIRE_SERVICE(redis);
  auto s = open_store(options(redis.url()));
  ASSERT_TRUE(s);
  Chain c(*s, 600, 7);  // ~2.5 MB of records
  ChainKey parent{};
  for (int i = 0; i < 600; ++i) {
    (void)s->enqueue(c.keys[i], parent, c.block_tokens(i), c.payloads[i].data());
    parent = c.keys[i];
    if (i % 50 == 0) s->flush(5s);
  }
  ASSERT_TRUE(s->flush(5s));
  const RemoteStats st = s->stats();
  EXPECT_GT(st.writes, 0u);
  EXPECT_LT(st.writes, 600u);
  EXPECT_EQ(st.writes + st.dropped_writes, 600u);
  EXPECT_GE(c.fetch(*s), 1);  // what fit is served
}

}  // namespace
}  // namespace hz::kvstore
