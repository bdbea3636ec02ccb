// `horizon bench peer` / `bench engine --peer` end to end with a fake llama-bench (a shell script
// that answers the arguments it gets with canned JSON and counts its invocations): the table's
// rows and ratios, the cache (hit on a rerun, miss when the peer build or the model changes, bypass
// with --no-peer-cache), the long rows with peak RSS, and errors.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

std::string bin() { return HORIZON_BINARY; }

// tokens/s it reports: pp = 100 + fa, tg = 10 + fa (so fa on is the better configuration).
const char* kFakePeer = R"SH(#!/bin/bash
if [ "$1" = "--help" ]; then echo "  -d, --n-depth <n>  (default: 0)"; exit 0; fi
echo run >> "$(dirname "$0")/count"
p=0; n=0; d=0; fa=0; t=1; ctk=f16
while [ $# -gt 0 ]; do
  case "$1" in
    -p) p=$2; shift;; -n) n=$2; shift;; -d) d=$2; shift;; -fa) fa=$2; shift;; -t) t=$2; shift;;
    -ctk) ctk=$2; shift;;
  esac
  shift
done
first=1
rec() {
  [ $first = 1 ] || echo ","
  first=0
  echo "{\"build_commit\":\"fake123\",\"build_number\":42,\"n_threads\":$t,\"type_k\":\"$ctk\",\"type_v\":\"$ctk\",\"flash_attn\":$3,\"n_prompt\":$1,\"n_gen\":$2,\"n_depth\":$d,\"avg_ts\":$4,\"samples_ts\":[$4,$4,$4]}"
}
echo "["
for f in ${fa//,/ }; do
  [ "$p" -gt 0 ] && rec $p 0 $f $((100 + f))
  [ "$n" -gt 0 ] && rec 0 $n $f $((10 + f))
done
echo "]"
)SH";

// A llama-bench from before -d (it rejects the flag and writes no n_depth) and the
// llama-batched-bench beside it: decode tokens/s after the prompt = 20.5 + fa.
const char* kOldPeer = R"SH(#!/bin/bash
if [ "$1" = "--help" ]; then echo "  -p, --n-prompt <n>"; exit 0; fi
echo run >> "$(dirname "$0")/count"
p=0; n=0; fa=0; t=1
while [ $# -gt 0 ]; do
  case "$1" in
    -p) p=$2; shift;; -n) n=$2; shift;; -fa) fa=$2; shift;; -t) t=$2; shift;;
    -d) echo "error: invalid parameter for argument: -d" >&2; exit 1;;
  esac
  shift
done
first=1
rec() {
  [ $first = 1 ] || echo ","
  first=0
  echo "{\"build_commit\":\"old456\",\"build_number\":7,\"n_threads\":$t,\"type_k\":\"f16\",\"type_v\":\"f16\",\"flash_attn\":$3,\"n_prompt\":$1,\"n_gen\":$2,\"avg_ts\":$4}"
}
echo "["
for f in ${fa//,/ }; do
  [ "$p" -gt 0 ] && rec $p 0 $f $((100 + f))
  [ "$n" -gt 0 ] && rec 0 $n $f $((10 + f))
done
echo "]"
)SH";
const char* kFakeBatched = R"SH(#!/bin/bash
echo "batched $*" >> "$(dirname "$0")/batched-args"
npp=0; ntg=0; npl=1; fa=0; t=1
while [ $# -gt 0 ]; do
  case "$1" in
    -npp) npp=$2; shift;; -ntg) ntg=$2; shift;; -npl) npl=$2; shift;; -fa) fa=1;; -t) t=$2; shift;;
  esac
  shift
done
echo "main: a log line"
echo "{\"n_kv_max\": 64, \"n_batch\": 2048, \"n_ubatch\": 512, \"flash_attn\": $fa, \"is_pp_shared\": 0, \"n_gpu_layers\": 0, \"n_threads\": $t, \"n_threads_batch\": $t, \"pp\": $npp, \"tg\": $ntg, \"pl\": $npl, \"n_kv\": 36, \"t_pp\": 0.1, \"speed_pp\": 320.0, \"t_tg\": 0.2, \"speed_tg\": 2$fa.5, \"t\": 0.3, \"speed\": 120.0}"
)SH";

struct Fixture {
  std::string dir, peer, model, cache;
  Fixture() {
    dir = test::make_temp_dir("bench_peer");
    peer = dir + "/bin/llama-bench";
    std::filesystem::create_directories(dir + "/bin");
    std::ofstream(peer) << kFakePeer;
    chmod(peer.c_str(), 0755);
    model = dir + "/model.gguf";
    std::filesystem::copy_file(test::model_path("stories260K.gguf"), model);
    cache = dir + "/cache";
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
  int count() const {
    std::ifstream in(dir + "/bin/count");
    int n = 0;
    std::string line;
    while (std::getline(in, line)) ++n;
    return n;
  }
  std::string base_flags() const {
    return " --peer " + peer + " -m " + model + " -t 1 -r 2 --pp 16 --tg 4 --peer-depth 32 --peer-cache-dir " + cache +
           " --peer-cache-max-load 0";  // the test machine may be busy: cache regardless
  }
};

json run_json(const std::string& args, std::string* err_out = nullptr) {
  std::string out, err;
  int rc = test::run_command(bin() + " bench peer" + args + " --json", &out, &err);
  EXPECT_EQ(rc, 0) << err;
  if (err_out) *err_out = err;
  json j = json::parse(out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << out;
  return j;
}

const json* find_row(const json& j, const std::string& test, const std::string& ours_config) {
  for (const auto& r : j["rows"]) {
    if (r["test"] == test && r["ours_config"] == ours_config) return &r;
  }
  return nullptr;
}

TEST(BenchPeerCliTest, TableRowsRatiosAndCache) {
  Fixture f;
  json j = run_json(f.base_flags());
  EXPECT_EQ(f.count(), 3);  // pp+tg (fa 0,1), f16 at depth, q8_0 at depth
  EXPECT_EQ(j["conditions"]["peer_build_commit"], "fake123");
  EXPECT_EQ(j["conditions"]["peer_build_number"], 42);
  EXPECT_EQ(j["conditions"]["threads"], 1);
  ASSERT_EQ(j["rows"].size(), 5u) << j["rows"].dump(1);
  const json* pp = find_row(j, "prefill pp16", "f16 KV");
  ASSERT_NE(pp, nullptr);
  EXPECT_EQ((*pp)["peer_values"], json::array({100.0, 101.0}));
  EXPECT_GT((*pp)["ours"].get<double>(), 0);
  EXPECT_NEAR((*pp)["ratio"].get<double>(), (*pp)["ours"].get<double>() / 101.0, 1e-9);
  const json* tg = find_row(j, "decode tg4, depth 0", "f16 KV");
  ASSERT_NE(tg, nullptr);
  EXPECT_EQ((*tg)["peer_values"], json::array({10.0, 11.0}));
  const json* f16 = find_row(j, "decode tg4 @ d32, f16 KV", "f16");
  ASSERT_NE(f16, nullptr);
  EXPECT_EQ((*f16)["peer_values"], json::array({10.0}));  // fa off
  EXPECT_DOUBLE_EQ((*f16)["target"].get<double>(), 1.2);
  for (const char* kv : {"int8", "fp8"}) {
    const json* q = find_row(j, "decode tg4 @ d32, 8-bit KV", kv);
    ASSERT_NE(q, nullptr) << kv;
    EXPECT_EQ((*q)["peer_values"], json::array({11.0})) << kv;  // q8_0 needs fa on
    EXPECT_GT((*q)["ours"].get<double>(), 0) << kv;
    EXPECT_DOUBLE_EQ((*q)["target"].get<double>(), 2.0);
  }
  int cached = 0;
  for (const auto& r : j["runs"]) cached += r["cached"].get<bool>() ? 1 : 0;
  EXPECT_EQ(cached, 0);

  // Rerun: every peer result comes from the cache; `bench engine --peer` is the same command.
  std::string err;
  json again = run_json(f.base_flags(), &err);
  EXPECT_EQ(f.count(), 3);
  cached = 0;
  for (const auto& r : again["runs"]) cached += r["cached"].get<bool>() ? 1 : 0;
  EXPECT_EQ(cached, 3);
  std::string out;
  ASSERT_EQ(test::run_command(bin() + " bench engine" + f.base_flags(), &out, &err), 0) << err;
  EXPECT_EQ(f.count(), 3);
  EXPECT_NE(out.find("llama.cpp config"), std::string::npos) << out;
  EXPECT_NE(out.find("fake123"), std::string::npos) << out;
  EXPECT_NE(err.find("(cached)"), std::string::npos) << err;

  // --no-peer-cache reruns the peer; a changed peer build or model file misses the cache.
  run_json(f.base_flags() + " --no-peer-cache");
  EXPECT_EQ(f.count(), 6);
  std::ofstream(f.peer, std::ios::app) << "# rebuilt\n";
  run_json(f.base_flags());
  EXPECT_EQ(f.count(), 9);
  std::ofstream(f.model, std::ios::app) << "x";  // trailing byte: still loads, other digest
  run_json(f.base_flags());
  EXPECT_EQ(f.count(), 12);
  run_json(f.base_flags());
  EXPECT_EQ(f.count(), 12);
}

TEST(BenchPeerCliTest, LongRowsReportPeakRss) {
  Fixture f;
  json j = run_json(f.base_flags() + " --long --long-depth 64 --long-prompt 48");
  EXPECT_EQ(f.count(), 6);
  const json* pp = find_row(j, "prefill pp48", "f16 KV");
  ASSERT_NE(pp, nullptr);
  EXPECT_EQ((*pp)["peer_values"], json::array({101.0}));
  ASSERT_NE(find_row(j, "decode tg4 @ d64, 8-bit KV", "int8"), nullptr);
  for (const char* kv : {"int8", "fp8"}) {
    const json* rss = find_row(j, "peak RSS, tg4 @ d64, 8-bit KV", kv);
    ASSERT_NE(rss, nullptr) << kv;
    EXPECT_EQ((*rss)["unit"], "bytes");
    EXPECT_TRUE((*rss)["lower_is_better"].get<bool>());
    EXPECT_GT((*rss)["ours"].get<double>(), 1 << 20);
    EXPECT_GT((*rss)["peer_values"][0].get<double>(), 0);  // the bash script's own RSS
  }
}

TEST(BenchPeerCliTest, BusyMachineResultsAreNotCached) {
  Fixture f;
  std::string flags = f.base_flags();
  flags = flags.substr(0, flags.find(" --peer-cache-max-load")) + " --peer-cache-max-load 0.001";
  std::string err;
  json j = run_json(flags, &err);
  EXPECT_EQ(f.count(), 3);
  if (j["runs"][0]["max_load"].get<double>() <= 0.001) GTEST_SKIP() << "load average 0.00: nothing to test";
  run_json(flags);
  EXPECT_EQ(f.count(), 6);  // nothing was cached
  EXPECT_FALSE(std::filesystem::exists(f.cache) && !std::filesystem::is_empty(f.cache));
}

// --rounds: each round runs every test once per engine (one repetition, never from the cache);
// the ratio is the median of the per-round ratios, the spread and a bandwidth probe per round are
// reported. --peer-depth 0 drops the decode-at-depth rows.
TEST(BenchPeerCliTest, PairedRoundsReportMedianOfPerRoundRatios) {
  Fixture f;
  json j = run_json(" --peer " + f.peer + " -m " + f.model + " -t 1 --pp 16 --tg 4 --peer-depth 0 --rounds 3 --peer-cache-dir " +
                    f.cache);
  EXPECT_EQ(f.count(), 3);  // one peer run per round
  EXPECT_EQ(j["mode"], "peer-paired");
  EXPECT_EQ(j["conditions"]["rounds"], 3);
  EXPECT_EQ(j["conditions"]["reps"], 1);
  ASSERT_EQ(j["rows"].size(), 2u) << j["rows"].dump(1);  // prefill and decode at depth 0 only
  for (const auto& r : j["rows"]) {
    ASSERT_EQ(r["round_ratios"].size(), 3u) << r.dump();
    std::vector<double> v = r["round_ratios"].get<std::vector<double>>();
    for (double x : v) EXPECT_GT(x, 0);
    std::sort(v.begin(), v.end());
    EXPECT_DOUBLE_EQ(r["ratio"].get<double>(), v[1]) << r.dump();
  }
  ASSERT_EQ(j["rounds"].size(), 3u);
  for (const auto& r : j["rounds"]) EXPECT_GT(r["bandwidth_gb_s"].get<double>(), 0.0);
  ASSERT_EQ(j["runs"].size(), 6u);
  // Engines alternate and the order flips every other round; every peer run is live and -r 1.
  EXPECT_EQ(j["runs"][0]["engine"], "llama.cpp");
  EXPECT_EQ(j["runs"][0]["round"], 0);
  int peer_runs = 0;
  for (const auto& r : j["runs"]) {
    EXPECT_FALSE(r["cached"].get<bool>());
    if (r["engine"] != "llama.cpp") continue;
    ++peer_runs;
    const auto args = r["args"].get<std::vector<std::string>>();
    const auto it = std::find(args.begin(), args.end(), "-r");
    ASSERT_NE(it, args.end());
    EXPECT_EQ(*(it + 1), "1");
  }
  EXPECT_EQ(peer_runs, 3);
  // Nothing was cached: a second paired run runs the peer again.
  run_json(" --peer " + f.peer + " -m " + f.model + " -t 1 --pp 16 --tg 4 --peer-depth 0 --rounds 1 --peer-cache-dir " + f.cache);
  EXPECT_EQ(f.count(), 4);
  // The text table shows the spread column.
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + " bench peer --peer " + f.peer + " -m " + f.model +
                                  " -t 1 --pp 16 --tg 4 --peer-depth 0 --rounds 2 --peer-cache-dir " + f.cache,
                              &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("spread (rounds)"), std::string::npos) << out;
  EXPECT_NE(out.find("read bandwidth"), std::string::npos) << out;
}

// A llama-bench without -d: the base rows from it (no -d passed), the depth rows from the
// llama-batched-bench beside it, one sequence with the depth as its prompt.
TEST(BenchPeerCliTest, OldLlamaBenchDepthRowsRunThroughBatchedBench) {
  Fixture f;
  std::ofstream(f.peer) << kOldPeer;
  const std::string batched = f.dir + "/bin/llama-batched-bench";
  std::ofstream(batched) << kFakeBatched;
  chmod(batched.c_str(), 0755);
  json j = run_json(f.base_flags());
  EXPECT_EQ(f.count(), 1);  // llama-bench ran once, for pp + tg
  EXPECT_EQ(j["conditions"]["peer_build_commit"], "old456");
  EXPECT_EQ(j["conditions"]["peer_depth_tool"], batched);
  const json* pp = find_row(j, "prefill pp16", "f16 KV");
  ASSERT_NE(pp, nullptr);
  EXPECT_EQ((*pp)["peer_values"], json::array({100.0, 101.0}));
  const json* f16 = find_row(j, "decode tg4 @ d32, f16 KV", "f16");
  ASSERT_NE(f16, nullptr);
  EXPECT_EQ((*f16)["peer_values"], json::array({20.5}));  // flash attention off
  const json* q = find_row(j, "decode tg4 @ d32, 8-bit KV", "int8");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ((*q)["peer_values"], json::array({21.5}));  // q8_0 with -fa
  EXPECT_GT((*q)["ratio"].get<double>(), 0);
  std::ifstream in(f.dir + "/bin/batched-args");
  std::stringstream args;
  args << in.rdbuf();
  EXPECT_NE(args.str().find("-npp 32 -ntg 4 -npl 1 --output-format jsonl -fa -ctk q8_0 -ctv q8_0"), std::string::npos)
      << args.str();
  EXPECT_NE(args.str().find("-c 36"), std::string::npos) << args.str();
  // Cached like llama-bench's results: a rerun runs neither.
  json again = run_json(f.base_flags());
  EXPECT_EQ(f.count(), 1);
  int cached = 0;
  for (const auto& r : again["runs"]) cached += r["cached"].get<bool>() ? 1 : 0;
  EXPECT_EQ(cached, 3);
  std::string text, text_err;
  ASSERT_EQ(test::run_command(bin() + " bench peer" + f.base_flags(), &text, &text_err), 0) << text_err;
  EXPECT_NE(text.find("depth rows: " + batched), std::string::npos) << text;

  // Without a llama-batched-bench: the base rows still run, the peer side of the depth rows is empty.
  std::filesystem::remove(batched);
  json none = run_json(f.base_flags() + " --no-peer-cache");
  EXPECT_EQ(none["conditions"]["peer_depth_tool"], "");
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + " bench peer" + f.base_flags(), &out, &err), 0) << err;
  EXPECT_NE(out.find("has no -d"), std::string::npos) << out;
  const json* missing = find_row(none, "decode tg4 @ d32, f16 KV", "f16");
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ((*missing)["peer_values"], json::array({0.0}));
  EXPECT_EQ((*missing)["ratio"].get<double>(), 0.0);
}

TEST(BenchPeerCliTest, ErrorsNameTheProblem) {
  Fixture f;
  std::string out, err;
  EXPECT_NE(test::run_command(bin() + " bench peer --peer /nonexistent/llama-bench -m " + f.model, &out, &err), 0);
  EXPECT_NE(err.find("--peer"), std::string::npos) << err;
  EXPECT_NE(test::run_command(bin() + " bench peer --peer " + f.peer + " -m " + f.dir + "/none.gguf", &out, &err), 0);
  EXPECT_NE(err.find("-m"), std::string::npos) << err;
  // A peer that fails: its exit code and stderr are in the message.
  std::string bad = f.dir + "/bin/bad-bench";
  std::ofstream(bad) << "#!/bin/sh\necho 'error: unknown argument: -d' >&2\nexit 1\n";
  chmod(bad.c_str(), 0755);
  EXPECT_NE(test::run_command(bin() + " bench peer --peer " + bad + " -m " + f.model + " -t 1 --pp 8 --tg 2 --peer-depth 16 --peer-cache-dir " + f.cache, &out, &err), 0);
  EXPECT_NE(err.find("unknown argument: -d"), std::string::npos) << err;
  EXPECT_EQ(f.count(), 0);
}

}  // namespace
}  // namespace hz
