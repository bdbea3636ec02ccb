// The pieces of `horizon bench peer`: reading llama-bench's JSON (a recorded sample), the cache
// key and the cache's hit/miss rules, and the comparison table's ratios and targets.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "bench/llama_bench_json.h"
#include "bench/peer_bench.h"
#include "bench/peer_cache.h"
#include "support/test_support.h"

namespace hz::bench {
namespace {

// Two records as llama-bench (build 7200-ish, -o json) writes them, trimmed to the fields it
// always prints plus a few others; the second has flash attention on and q8_0 K/V.
const char* kSample = R"([
  {
    "build_commit": "4d5e6f7",
    "build_number": 7201,
    "cpu_info": "AMD EPYC",
    "model_filename": "/work/models/llama1b-q4_0.gguf",
    "model_type": "llama 1B Q4_0",
    "n_threads": 2,
    "type_k": "f16",
    "type_v": "f16",
    "flash_attn": 0,
    "n_prompt": 512,
    "n_gen": 0,
    "n_depth": 0,
    "avg_ns": 7901234567,
    "avg_ts": 64.80,
    "stddev_ts": 0.5,
    "samples_ns": [ 7900000000, 7800000000, 8000000000 ],
    "samples_ts": [ 64.81, 65.64, 64.0 ]
  },
  {
    "build_commit": "4d5e6f7",
    "build_number": 7201,
    "model_filename": "/work/models/llama1b-q4_0.gguf",
    "n_threads": 2,
    "type_k": "q8_0",
    "type_v": "q8_0",
    "flash_attn": 1,
    "n_prompt": 0,
    "n_gen": 128,
    "n_depth": 4096,
    "avg_ts": 7.6,
    "samples_ts": [ 7.5, 9.0, 6.3 ]
  }
])";

TEST(LlamaBenchJsonTest, ParsesRecordedSample) {
  auto r = parse_llama_bench_json(std::string(kSample));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  const LlamaBenchRecord& a = (*r)[0];
  EXPECT_EQ(a.build_commit, "4d5e6f7");
  EXPECT_EQ(a.build_number, 7201);
  EXPECT_EQ(a.n_threads, 2);
  EXPECT_EQ(a.n_prompt, 512);
  EXPECT_EQ(a.flash_attn, 0);
  EXPECT_EQ(a.type_k, "f16");
  EXPECT_EQ(a.test_name(), "pp512");
  EXPECT_DOUBLE_EQ(a.median_ts(), 64.81);
  const LlamaBenchRecord& b = (*r)[1];
  EXPECT_EQ(b.type_v, "q8_0");
  EXPECT_EQ(b.flash_attn, 1);
  EXPECT_EQ(b.test_name(), "tg128@d4096");
  EXPECT_DOUBLE_EQ(b.median_ts(), 7.5);  // the median of the samples, not avg_ts
}

TEST(LlamaBenchJsonTest, AcceptsOlderBoolFlashAttnAndMissingSamples) {
  auto r = parse_llama_bench_json(std::string(
      R"([{"build_commit":"x","build_number":1,"n_threads":4,"type_k":"f16","type_v":"f16","flash_attn":true,
           "n_prompt":0,"n_gen":16,"n_depth":0,"avg_ts":12.5}])"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].flash_attn, 1);
  EXPECT_DOUBLE_EQ((*r)[0].median_ts(), 12.5);
}

TEST(LlamaBenchJsonTest, BatchedBenchLinesBecomeDepthRecords) {
  const std::string text =
      "main: n_kv_max = 4160\n"
      R"({"n_kv_max": 4160, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 1, "is_pp_shared": 0, "n_gpu_layers": 0, "n_threads": 2, "n_threads_batch": 2, "pp": 4096, "tg": 64, "pl": 1, "n_kv": 4160, "t_pp": 40.1, "speed_pp": 102.1, "t_tg": 2.5, "speed_tg": 25.6, "t": 42.6, "speed": 97.6})"
      "\n\nllama_perf_context_print: load time = 1 ms\n";
  auto recs = batched_bench_records(text, "q8_0", "q8_0");
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  auto parsed = parse_llama_bench_json(*recs);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 1u);
  const LlamaBenchRecord& r = (*parsed)[0];
  EXPECT_EQ(r.n_prompt, 0);
  EXPECT_EQ(r.n_gen, 64);
  EXPECT_EQ(r.n_depth, 4096);
  EXPECT_EQ(r.flash_attn, 1);
  EXPECT_EQ(r.type_k, "q8_0");
  EXPECT_DOUBLE_EQ(r.median_ts(), 25.6);
  EXPECT_EQ(r.test_name(), "tg64@d4096");
  auto none = batched_bench_records("| PP | TG |\n", "f16", "f16");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("jsonl"), std::string::npos);
  auto broken = batched_bench_records("{\"pp\": 4096, \"tg\": 64}\n", "f16", "f16");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("'pl'"), std::string::npos) << broken.status().message();
}

TEST(LlamaBenchJsonTest, ErrorsNameTheField) {
  auto not_json = parse_llama_bench_json(std::string("llama-bench: error: unknown argument"));
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("not JSON"), std::string::npos);
  auto not_array = parse_llama_bench_json(std::string("{}"));
  ASSERT_FALSE(not_array.ok());
  EXPECT_NE(not_array.status().message().find("array"), std::string::npos);
  // Builds from before -d write no n_depth: depth 0. A missing n_gen is an error.
  auto no_depth = parse_llama_bench_json(std::string(
      R"([{"build_commit":"x","build_number":1,"n_threads":4,"type_k":"f16","type_v":"f16","flash_attn":0,
           "n_prompt":0,"n_gen":16,"avg_ts":12.5}])"));
  ASSERT_TRUE(no_depth.ok()) << no_depth.status().message();
  EXPECT_EQ((*no_depth)[0].n_depth, 0);
  auto missing = parse_llama_bench_json(std::string(
      R"([{"build_commit":"x","build_number":1,"n_threads":4,"type_k":"f16","type_v":"f16","flash_attn":0,
           "n_prompt":0,"avg_ts":12.5}])"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'n_gen'"), std::string::npos) << missing.status().message();
  auto bad_depth = parse_llama_bench_json(std::string(
      R"([{"build_commit":"x","build_number":1,"n_threads":4,"type_k":"f16","type_v":"f16","flash_attn":0,
           "n_prompt":0,"n_gen":16,"n_depth":"4096","avg_ts":12.5}])"));
  ASSERT_FALSE(bad_depth.ok());
  EXPECT_NE(bad_depth.status().message().find("'n_depth'"), std::string::npos) << bad_depth.status().message();
  auto mistyped = parse_llama_bench_json(std::string(
      R"([{"build_commit":"x","build_number":1,"n_threads":4,"type_k":"f16","type_v":"f16","flash_attn":0,
           "n_prompt":0,"n_gen":"16","n_depth":0,"avg_ts":12.5}])"));
  ASSERT_FALSE(mistyped.ok());
  EXPECT_NE(mistyped.status().message().find("'n_gen'"), std::string::npos) << mistyped.status().message();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

TEST(PeerCacheTest, FileDigestFollowsContentNotName) {
  std::string dir = test::make_temp_dir("peer_digest");
  write(dir + "/a", "0123456789");
  write(dir + "/b", "0123456789");
  write(dir + "/c", "0123456788");  // same size, one byte differs
  auto a = file_digest(dir + "/a"), b = file_digest(dir + "/b"), c = file_digest(dir + "/c");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_FALSE(file_digest(dir + "/missing").ok());
  std::filesystem::remove_all(dir);
}

TEST(PeerCacheTest, BuildDigestCoversSiblingLibraries) {
  std::string dir = test::make_temp_dir("peer_build");
  write(dir + "/llama-bench", "#!/bin/sh\n");
  write(dir + "/libggml-cpu.so.0.1.0", "kernels v1");
  std::filesystem::create_symlink("libggml-cpu.so.0.1.0", dir + "/libggml-cpu.so");
  auto d1 = peer_build_digest(dir + "/llama-bench");
  ASSERT_TRUE(d1.ok()) << d1.status().message();
  EXPECT_NE(d1->find("-1libs"), std::string::npos) << *d1;  // the symlink is not counted twice
  write(dir + "/libggml-cpu.so.0.1.0", "kernels v2");
  auto d2 = peer_build_digest(dir + "/llama-bench");
  ASSERT_TRUE(d2.ok());
  EXPECT_NE(*d1, *d2);
  EXPECT_FALSE(peer_build_digest(dir + "/nope").ok());
  std::filesystem::remove_all(dir);
}

TEST(PeerCacheTest, KeyDependsOnEveryPart) {
  PeerCacheKey k{"xxh3-1-10", "xxh3-2-0libs", {"-t", "2", "-d", "4096"}};
  PeerCacheKey same = k;
  EXPECT_EQ(k.hex(), same.hex());
  EXPECT_EQ(k.hex().size(), 16u);
  PeerCacheKey m = k, p = k, a = k, split = k;
  m.model_digest = "xxh3-3-10";
  p.peer_digest = "xxh3-4-0libs";
  a.args = {"-t", "2", "-d", "16384"};
  split.args = {"-t", "2-d", "4096"};  // the separator keeps argument boundaries apart
  for (const auto* other : {&m, &p, &a, &split}) EXPECT_NE(k.hex(), other->hex());
}

TEST(PeerCacheTest, StoresLoadsAndMissesOnOtherKeys) {
  std::string dir = test::make_temp_dir("peer_cache") + "/nested/cache";
  PeerCache cache(dir);
  PeerCacheKey k{"xxh3-1-10", "xxh3-2-0libs", {"-t", "2"}};
  EXPECT_FALSE(cache.load(k).has_value());
  ASSERT_TRUE(cache.store(k, {{"results", nlohmann::json::array({1, 2})}, {"wall_seconds", 3.5}}).ok());
  auto hit = cache.load(k);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ((*hit)["results"], nlohmann::json::array({1, 2}));
  EXPECT_DOUBLE_EQ((*hit)["wall_seconds"].get<double>(), 3.5);
  PeerCacheKey other = k;
  other.args = {"-t", "4"};
  EXPECT_FALSE(cache.load(other).has_value());
  // A file at the key's path whose recorded parts disagree (edited, or a hash collision) is a miss.
  write(cache.path_for(other), R"({"model_digest":"xxh3-1-10","peer_digest":"xxh3-2-0libs","args":["-t","2"]})");
  EXPECT_FALSE(cache.load(other).has_value());
  write(cache.path_for(k), "{truncated");
  EXPECT_FALSE(cache.load(k).has_value());
}

TEST(PeerCacheTest, DefaultDirFollowsXdg) {
  const char* old = std::getenv("XDG_CACHE_HOME");
  std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", "/tmp/xdg_test", 1);
  EXPECT_EQ(default_peer_cache_dir(), "/tmp/xdg_test/horizon/peer");
  if (old) {
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    unsetenv("XDG_CACHE_HOME");
  }
}

TEST(ComparisonTableTest, RatiosUseThePeersBestConfiguration) {
  ComparisonRow r;
  r.test = "decode tg128, depth 0";
  r.peer_config = "fa off / on";
  r.peer_values = {27.2, 30.2};
  r.ours_config = "f16 KV";
  r.ours = 33.22;
  r.target = 1.0;
  EXPECT_DOUBLE_EQ(r.peer_best(), 30.2);
  EXPECT_NEAR(r.ratio(), 1.1, 1e-12);
  EXPECT_TRUE(r.meets_target());
  ComparisonRow q8 = r;
  q8.peer_values = {7.5};
  q8.ours = 14.0;
  q8.target = 2.0;
  EXPECT_FALSE(q8.meets_target());  // 1.87x < 2x
  ComparisonRow rss;
  rss.test = "peak RSS";
  rss.peer_values = {1000.0 * (1 << 20)};
  rss.ours = 900.0 * (1 << 20);
  rss.target = 1.0;
  rss.lower_is_better = true;
  rss.unit = "bytes";
  EXPECT_NEAR(rss.ratio(), 0.9, 1e-12);
  EXPECT_TRUE(rss.meets_target());
  ComparisonRow missing = r;
  missing.peer_values = {0, 0};
  EXPECT_EQ(missing.ratio(), 0);
  EXPECT_FALSE(missing.meets_target());

  std::string t = format_comparison_table({r, q8, rss, missing});
  EXPECT_NE(t.find("27.20 / 30.20"), std::string::npos) << t;
  EXPECT_NE(t.find("33.22"), std::string::npos) << t;
  EXPECT_NE(t.find("1.10x"), std::string::npos) << t;
  EXPECT_NE(t.find(">=1.00 ok"), std::string::npos) << t;
  EXPECT_NE(t.find("1.87x"), std::string::npos) << t;
  EXPECT_NE(t.find(">=2.00 no"), std::string::npos) << t;
  EXPECT_NE(t.find("<=1.00 ok"), std::string::npos) << t;
  EXPECT_NE(t.find("0.90x"), std::string::npos) << t;
  EXPECT_NE(t.find("- / -"), std::string::npos) << t;  // a missing peer figure prints as '-'
}

}  // namespace
}  // namespace hz::bench
