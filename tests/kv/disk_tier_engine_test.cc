// The disk tier end to end in-process on synth-tiny-f16: for every KV type a prompt's blocks survive
// an engine restart and are promoted from disk with bit-identical logits (top-20 log-probabilities
// at every step); RAM pressure demotes and later promotes; corrupt or truncated records are
// detected and recomputed, never served; write errors (a real ENOSPC from /dev/full, and injected
// ones) degrade to RAM-only while every request succeeds; another KV type never reuses a block.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>

#include "kvstore/kv_store.h"
#include "runtime/local_engine.h"
#include "support/collect_sink.h"
#include "support/test_support.h"

namespace hz {
namespace {

using test::CollectSink;

constexpr int32_t kPromptTokens = 320;  // 20 blocks of 16; 19 are reusable (the last token runs)

std::unique_ptr<LocalEngine> make_engine(const std::string& dir, KvType type, uint64_t kv_budget = 16u << 20,
                                         std::optional<KvType> disk_type = std::nullopt, const char* codec = "none",
                                         const char* policy = "lru", std::optional<KvType> v_type = std::nullopt) {
  EngineOptions o;
  o.model_path = test::model_path("synth-tiny-f16.gguf");
  o.threads = 2;
  o.max_model_len = 1024;
  o.max_num_seqs = 1;
  o.kv_dtype = type;
  o.kv_dtype_v = v_type;
  o.kv_budget_bytes = kv_budget;
  o.kv_disk_dir = dir;
  o.kv_disk_budget_bytes = 64u << 20;
  o.kv_disk_dtype = disk_type;
  o.kv_disk_codec = codec;
  o.kv_disk_policy = policy;
  auto e = LocalEngine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> prompt(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(kPromptTokens);
  for (auto& t : p) t = static_cast<int32_t>(3 + rng() % 500);
  return p;
}

std::shared_ptr<CollectSink> generate(LocalEngine& e, const std::vector<int32_t>& p) {
  auto sink = std::make_shared<CollectSink>();
  GenerationRequest r;
  r.prompt = p;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 3;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 20;
  r.sink = sink;
  auto id = e.submit(std::move(r));
  EXPECT_TRUE(id.ok()) << id.status().message();
  EXPECT_TRUE(sink->wait());
  EXPECT_TRUE(e.wait_idle(std::chrono::seconds(60)));
  EXPECT_NE(sink->final_event.finish_reason, FinishReason::kError) << sink->final_event.error.message();
  return sink;
}

void expect_same(const CollectSink& a, const CollectSink& b, const std::string& what) {
  EXPECT_EQ(a.ids, b.ids) << what;
  ASSERT_EQ(a.top.size(), b.top.size()) << what;
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].first, b.top[i].first) << what << " at " << i;
    // Bit-identical, not close: a promoted block holds exactly the bytes that were computed.
    EXPECT_EQ(std::memcmp(&a.top[i].second, &b.top[i].second, sizeof(float)), 0) << what << " at " << i;
  }
}

TEST(DiskTierEngine, RestartServesPrefixFromDiskBitIdenticalEveryKvType) {
  const char* codecs[] = {"none", "zstd", "lz4"};
  int k = 0;
  for (KvType type : all_kv_types()) {
    if (kv_type_cold_only(type)) continue;  // int3 / int2: refused as the only type
    const char* codec = codecs[k++ % 3];  // every codec meets several types
    const std::string name = std::string(kv_type_name(type)) + "/" + codec;
    const std::string dir = test::make_temp_dir("hz_kvdisk");
    std::shared_ptr<CollectSink> cold;
    {
      auto e = make_engine(dir, type, 16u << 20, std::nullopt, codec);
      ASSERT_NE(e, nullptr);
      cold = generate(*e, prompt(1));
      EXPECT_EQ(cold->final_event.cached_tokens, 0) << name;
    }  // shutdown persists the cached prefix
    auto e = make_engine(dir, type, 16u << 20, std::nullopt, codec);
    ASSERT_NE(e, nullptr);
    EngineStats s0 = e->stats();
    EXPECT_TRUE(s0.kv_disk_enabled);
    EXPECT_GE(s0.kv_disk_blocks, 19u) << name;
    auto warm = generate(*e, prompt(1));
    EngineStats s = e->stats();
    EXPECT_EQ(s.kv_disk_promotions, 19u) << name;
    EXPECT_EQ(s.kv_disk_hits, 19u) << name;
    EXPECT_EQ(s.kv_disk_checksum_failures, 0u) << name;
    EXPECT_EQ(warm->final_event.cached_tokens, 19 * 16) << name;
    expect_same(*cold, *warm, name);
  }
}

// Keys and values in different types: records hold both planes per layer, in their own sizes, and
// come back bit-identical; a store written with other K/V types is never reused.
TEST(DiskTierEngine, SeparateKeyAndValueTypesRestartBitIdentical) {
  const std::string dir = test::make_temp_dir("hz_kvdisk");
  std::shared_ptr<CollectSink> cold;
  {
    auto e = make_engine(dir, KvType::kInt8c, 16u << 20, std::nullopt, "zstd", "lru", KvType::kInt4);
    ASSERT_NE(e, nullptr);
    cold = generate(*e, prompt(4));
  }
  {
    auto e = make_engine(dir, KvType::kInt8c, 16u << 20, std::nullopt, "zstd", "lru", KvType::kInt4);
    ASSERT_NE(e, nullptr);
    auto warm = generate(*e, prompt(4));
    EXPECT_EQ(e->stats().kv_disk_promotions, 19u);
    EXPECT_EQ(warm->final_event.cached_tokens, 19 * 16);
    expect_same(*cold, *warm, "K int8c / V int4");
  }
  // The same types the other way round are another precision: nothing is reused.
  auto e = make_engine(dir, KvType::kInt4, 16u << 20, std::nullopt, "zstd", "lru", KvType::kInt8c);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->stats().kv_disk_blocks, 0u);
  auto other = generate(*e, prompt(4));
  EXPECT_EQ(other->final_event.cached_tokens, 0);
  EXPECT_NE(other->top, cold->top) << "keys and values really are stored in their own types";
}

TEST(DiskTierEngine, RamPressureDemotesAndPromotesWithEitherPolicy) {
  uint64_t block_bytes = 0;
  {
    auto probe = make_engine(test::make_temp_dir("hz_kvdisk"), KvType::kF16);
    block_bytes = probe->kv().block_bytes();
  }
  for (const char* policy : {"lru", "lfu-decay"}) {
    const std::string dir = test::make_temp_dir("hz_kvdisk");
    // Room for one sequence and a few cached blocks: each new prompt evicts the previous one's.
    auto e = make_engine(dir, KvType::kF16, 26 * block_bytes, std::nullopt, "none", policy);
    ASSERT_NE(e, nullptr);
    auto a_cold = generate(*e, prompt(1));
    generate(*e, prompt(2));
    generate(*e, prompt(3));
    EngineStats s1 = e->stats();
    EXPECT_GT(s1.kv_disk_demotions, 0u) << policy;
    EXPECT_GT(s1.prefix_cache_evictions, 0u) << policy;
    EXPECT_GT(s1.kv_disk_blocks, 0u) << policy;
    EXPECT_GT(s1.kv_disk_write_bytes, 0u) << policy;
    auto a_again = generate(*e, prompt(1));
    EngineStats s2 = e->stats();
    EXPECT_GT(s2.kv_disk_promotions, 0u) << policy;
    EXPECT_EQ(a_again->final_event.cached_tokens, 19 * 16) << policy;  // RAM leftovers + disk: the whole prefix
    expect_same(*a_cold, *a_again, std::string("after demotion, ") + policy);
  }
}

struct StoreFiles {
  uint64_t slot_bytes = 0;
  std::vector<kvstore::IndexEntry> entries;
};
StoreFiles read_store(const std::string& dir) {
  std::ifstream f(kvstore::store_index_path(dir), std::ios::binary);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), {});
  auto r = kvstore::replay_index(b.data(), b.size());
  EXPECT_TRUE(r.ok());
  return {r->header.slot_bytes, r->entries};
}

TEST(DiskTierEngine, CorruptOrTruncatedRecordsAreRecomputedNeverServed) {
  std::shared_ptr<CollectSink> reference;
  for (int mode = 0; mode < 2; ++mode) {
    const std::string dir = test::make_temp_dir("hz_kvdisk");
    {
      auto e = make_engine(dir, KvType::kF16);
      reference = generate(*e, prompt(4));
    }
    StoreFiles st = read_store(dir);
    ASSERT_GE(st.entries.size(), 19u);
    const std::string data = kvstore::store_data_path(dir);
    if (mode == 0) {
      // Flip one payload byte of every record.
      std::fstream f(data, std::ios::binary | std::ios::in | std::ios::out);
      for (const auto& en : st.entries) {
        const auto off = static_cast<std::streamoff>(en.slot * st.slot_bytes + 64 + 4 * 16 + en.payload_len / 2);
        f.seekg(off);
        char c = 0;
        f.read(&c, 1);
        c ^= 0x01;
        f.seekp(off);
        f.write(&c, 1);
      }
    } else {
      // A torn file: only the first 5 slots (the chain's first 5 blocks) survive.
      uint32_t max_slot = 0;
      for (const auto& en : st.entries) max_slot = std::max(max_slot, en.slot);
      ASSERT_EQ(0, ::truncate(data.c_str(), static_cast<off_t>(5 * st.slot_bytes + st.slot_bytes / 2)));
    }
    auto e = make_engine(dir, KvType::kF16);
    auto again = generate(*e, prompt(4));
    EngineStats s = e->stats();
    if (mode == 0) {
      EXPECT_EQ(s.kv_disk_promotions, 0u);
      EXPECT_GE(s.kv_disk_checksum_failures, 1u);
      EXPECT_EQ(again->final_event.cached_tokens, 0);
    } else {
      EXPECT_EQ(s.kv_disk_promotions, 5u);
      EXPECT_EQ(again->final_event.cached_tokens, 5 * 16);
    }
    expect_same(*reference, *again, mode == 0 ? "flipped bytes" : "truncated");
  }
}

TEST(DiskTierEngine, WriteErrorsDegradeToRamOnlyAndRequestsSucceed) {
  uint64_t block_bytes = 0;
  std::vector<std::shared_ptr<CollectSink>> ref;
  {
    auto probe = make_engine(test::make_temp_dir("hz_kvdisk"), KvType::kF16);
    block_bytes = probe->kv().block_bytes();
    for (uint32_t p = 1; p <= 3; ++p) ref.push_back(generate(*probe, prompt(p)));
  }
  // Mode 0: the data file is /dev/full, which the store cannot even size: the tier is off from the
  // start (warned). Modes 1-3: ENOSPC injected at preallocation, record write and index append.
  const char* faults[] = {"", "grow", "write", "index"};
  for (int mode = 0; mode < 4; ++mode) {
    const std::string dir = test::make_temp_dir("hz_kvdisk");
    if (mode == 0) {
      ASSERT_EQ(0, ::symlink("/dev/full", kvstore::store_data_path(dir).c_str()));
    }
    auto e = make_engine(dir, KvType::kF16, 26 * block_bytes);
    ASSERT_NE(e, nullptr);
    const std::string fault = faults[mode];
    e->set_kv_disk_io_fault([fault](const char* op) {
      return fault == op ? io_error("{}: No space left on device", op) : Status();
    });
    for (uint32_t p = 1; p <= 3; ++p) expect_same(*ref[p - 1], *generate(*e, prompt(p)), "degraded");
    expect_same(*ref[0], *generate(*e, prompt(1)), "degraded, again");
    EngineStats s = e->stats();
    EXPECT_EQ(s.kv_disk_enabled, mode != 0);
    if (mode != 0) {
      EXPECT_TRUE(s.kv_disk_degraded) << fault;
      EXPECT_EQ(s.kv_disk_io_errors, 1u) << fault;
      EXPECT_EQ(s.kv_disk_blocks, 0u) << fault;
    }
  }
}

TEST(DiskTierEngine, DiskDtypeRequantizesSmallerAndClose) {
  const std::string dir = test::make_temp_dir("hz_kvdisk");
  std::shared_ptr<CollectSink> cold;
  uint64_t same_bytes = 0;
  {
    auto e = make_engine(test::make_temp_dir("hz_kvdisk"), KvType::kF16);
    cold = generate(*e, prompt(6));
  }
  {
    auto e = make_engine(dir, KvType::kF16, 16u << 20, KvType::kInt8);
    expect_same(*cold, *generate(*e, prompt(6)), "first run (computed, not from disk)");
  }
  auto e = make_engine(dir, KvType::kF16, 16u << 20, KvType::kInt8);
  EngineStats s0 = e->stats();
  auto warm = generate(*e, prompt(6));
  EngineStats s = e->stats();
  EXPECT_EQ(s.kv_disk_promotions, 19u);
  EXPECT_EQ(warm->final_event.cached_tokens, 19 * 16);
  // int8 on disk: about half the f16 block (plus scales and the record header).
  same_bytes = e->kv().block_bytes();
  ASSERT_GT(s0.kv_disk_blocks, 0u);
  EXPECT_LT(s0.kv_disk_bytes_used / s0.kv_disk_blocks, same_bytes * 6 / 10);
  // Lossy but close: the same greedy tokens and log-probabilities within int8 quantization error.
  EXPECT_EQ(warm->ids, cold->ids);
  ASSERT_EQ(warm->top.size(), cold->top.size());
  for (size_t i = 0; i < cold->top.size(); i += 20) EXPECT_NEAR(warm->top[i].second, cold->top[i].second, 0.05) << i;
  // The stored type is part of the fingerprint: an engine storing f16 does not read int8 records.
  e.reset();
  auto f16 = make_engine(dir, KvType::kF16);
  EXPECT_EQ(f16->stats().kv_disk_blocks, 0u);
}

TEST(DiskTierEngine, AnotherKvTypeNeverReusesBlocks) {
  const std::string dir = test::make_temp_dir("hz_kvdisk");
  {
    auto e = make_engine(dir, KvType::kF16);
    generate(*e, prompt(5));
  }
  std::shared_ptr<CollectSink> int8_cold;
  {
    auto e = make_engine(test::make_temp_dir("hz_kvdisk"), KvType::kInt8);
    int8_cold = generate(*e, prompt(5));
  }
  auto e = make_engine(dir, KvType::kInt8);
  EXPECT_EQ(e->stats().kv_disk_blocks, 0u);  // cleared: another fingerprint
  auto again = generate(*e, prompt(5));
  EXPECT_EQ(e->stats().kv_disk_promotions, 0u);
  EXPECT_EQ(again->final_event.cached_tokens, 0);
  expect_same(*int8_cold, *again, "int8 after f16");
}

}  // namespace
}  // namespace hz
