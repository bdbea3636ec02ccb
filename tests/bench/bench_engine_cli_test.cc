// `horizon bench engine` end to end on tiny models: the JSON report's fields and numbers, the
// synthetic fill beyond the prompt length, the table and SVG outputs, errors; and a `horizon synth`
// file going through `horizon run` and `bench engine` (synth files load and run).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

std::string bin() { return HORIZON_BINARY; }
std::string stories() { return test::model_path("stories260K.gguf"); }

void expect_summary(const json& s, const std::string& what) {
  ASSERT_TRUE(s.is_object()) << what;
  for (const char* k : {"median", "min", "max"}) {
    ASSERT_TRUE(s.contains(k) && s[k].is_number()) << what << " " << k;
  }
  EXPECT_GT(s["min"].get<double>(), 0) << what;
  EXPECT_LE(s["min"].get<double>(), s["median"].get<double>()) << what;
  EXPECT_LE(s["median"].get<double>(), s["max"].get<double>()) << what;
}

TEST(BenchEngineCliTest, JsonReportWithSyntheticDepth) {
  std::string dir = test::make_temp_dir("bench_engine");
  std::string out, err;
  int rc = test::run_command(bin() + " bench engine -m " + stories() +
                                 " -p 16,32 -n 4 --depth 0,200 --reps 3 -t 2 --json --svg " + dir + "/plot.svg",
                             &out, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(err, "");  // no progress output when not on a terminal / in JSON mode
  json j = json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["mode"], "engine");
  const json& c = j["conditions"];
  for (const char* k : {"cpu_model", "cpu_features", "num_cpus", "ram_bytes", "git_hash", "horizon_version",
                        "model_path", "weight_type", "kv_cache_dtype", "threads", "fill", "reps",
                        "decode_weight_bytes_per_token"}) {
    EXPECT_TRUE(c.contains(k)) << k;
  }
  EXPECT_EQ(c["weight_type"], "f32");
  EXPECT_EQ(c["kv_cache_dtype"], "f16");
  EXPECT_EQ(c["fill"], "synthetic");
  EXPECT_EQ(c["threads"], 2);
  EXPECT_EQ(c["reps"], 3);
  EXPECT_GT(c["decode_weight_bytes_per_token"].get<double>(), 0);

  const json& r = j["results"];
  ASSERT_EQ(r.size(), 4u) << r.dump(1);
  EXPECT_EQ(r[0]["test"], "pp16");
  EXPECT_EQ(r[1]["test"], "pp32");
  EXPECT_EQ(r[2]["test"], "tg4");
  EXPECT_EQ(r[3]["test"], "tg4@d200");
  for (int i = 0; i < 2; ++i) {
    expect_summary(r[i]["prefill_tokens_per_s"], r[i]["test"]);
    EXPECT_FALSE(r[i].contains("decode_tokens_per_s"));
    EXPECT_EQ(r[i]["samples_tokens_per_s"].size(), 3u);
  }
  for (int i = 2; i < 4; ++i) {
    expect_summary(r[i]["decode_tokens_per_s"], r[i]["test"]);
    EXPECT_EQ(r[i]["samples_tokens_per_s"].size(), 3u);
  }
  // Depth 200 > every prompt length, reached without a prefill.
  EXPECT_EQ(r[3]["depth"], 200);
  EXPECT_EQ(r[3]["fill"], "synthetic");
  EXPECT_GE(r[3]["fill_seconds"].get<double>(), 0);

  std::ifstream svg(dir + "/plot.svg");
  std::stringstream ss;
  ss << svg.rdbuf();
  EXPECT_NE(ss.str().find("<svg"), std::string::npos);
  EXPECT_NE(ss.str().find("<polyline"), std::string::npos);
  // The model's file in the title; prefill and decode each on a panel of their own.
  EXPECT_NE(ss.str().find("horizon bench engine: stories260K.gguf"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find(">prefill</text>"), std::string::npos);
  EXPECT_NE(ss.str().find(">decode</text>"), std::string::npos);
  EXPECT_NE(ss.str().find("height=\"960\""), std::string::npos);
  test::run_command("rm -rf " + dir);
}

TEST(BenchEngineCliTest, PrefillFillAndTable) {
  std::string out, err;
  int rc = test::run_command(bin() + " bench engine -m " + stories() +
                                 " -p 0 -n 2 --depth 40 --reps 1 -t 1 --fill prefill --kv-cache-dtype f32",
                             &out, &err);
  ASSERT_EQ(rc, 0) << err;
  // The table: conditions, then a row per test, and the fill that was used.
  EXPECT_NE(out.find("cpu:"), std::string::npos) << out;
  EXPECT_NE(out.find("KV f32"), std::string::npos) << out;
  EXPECT_NE(out.find("fill prefill"), std::string::npos) << out;
  EXPECT_NE(out.find("tg2@d40"), std::string::npos) << out;
  EXPECT_EQ(out.find("pp"), std::string::npos) << out;  // -p 0: no prefill test
  EXPECT_NE(out.find("depth reached by prefill fill"), std::string::npos) << out;
  EXPECT_EQ(out.find("training context"), std::string::npos) << out;  // 40 is within stories260K's 512
}

// A depth past the model's training context runs (speed), with a note that says so.
TEST(BenchEngineCliTest, DepthPastTheTrainingContextIsNoted) {
  std::string out, err;
  int rc = test::run_command(bin() + " bench engine -m " + stories() + " -p 0 -n 2 --depth 600 --reps 1 -t 1", &out, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("tg2@d600"), std::string::npos) << out;
  EXPECT_NE(out.find("note: depth 600 is past the model's training context (512 tokens)"), std::string::npos) << out;
}

// --seqs: the decode rows run several sequences through one forward call per step.
TEST(BenchEngineCliTest, SeveralSequencesDecodeTogether) {
  std::string out, err;
  int rc = test::run_command(bin() + " bench engine -m " + stories() + " -p 0 -n 4 --depth 0,40 --seqs 3 --reps 2 -t 2 --json",
                             &out, &err);
  ASSERT_EQ(rc, 0) << err;
  json j = json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["conditions"]["batch"], 3);
  const json& r = j["results"];
  ASSERT_EQ(r.size(), 2u) << r.dump(1);
  EXPECT_EQ(r[0]["test"], "tg4x3");
  EXPECT_EQ(r[1]["test"], "tg4x3@d40");
  for (const auto& row : r) {
    EXPECT_EQ(row["batch"], 3);
    EXPECT_EQ(row["samples_tokens_per_s"].size(), 2u);
    expect_summary(row["decode_tokens_per_s"], row["test"]);
  }
  EXPECT_GT(r[1]["fill_seconds"].get<double>(), 0);
}

TEST(BenchEngineCliTest, BadInputsGiveOneClearError) {
  struct Case {
    std::string args;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"-m /nonexistent.gguf", "no such file"},
      {"-m " + stories() + " --fill magic", "--fill"},
      {"-m " + stories() + " --reps 0", "--reps"},
      {"-m " + stories() + " -p -5", "-p"},
      {"-m " + stories() + " --depth -1", "--depth"},
      {"-m " + stories() + " --kv-cache-dtype f13", "--kv-cache-dtype"},
      {"-m " + stories() + " -p 0 -n 0", "nothing to measure"},
      {"-m " + stories() + " --seqs 0", "--seqs"},
      {"-m " + stories() + " --seqs 2 --kv-budget 1MiB", "--seqs"},
  };
  for (const auto& c : cases) {
    std::string out, err;
    int rc = test::run_command(bin() + " bench engine " + c.args, &out, &err);
    EXPECT_NE(rc, 0) << c.args;
    EXPECT_NE(err.find("error:"), std::string::npos) << c.args << ": " << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.args << ": " << err;
  }
}

// Issue 6 must-show: a synth file loads and runs in `horizon run` and `bench engine`.
TEST(BenchEngineCliTest, SynthModelRunsAndBenchmarks) {
  std::string dir = test::make_temp_dir("bench_synth");
  std::string file = dir + "/tiny.gguf";
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + " synth -o " + file +
                                  " --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 300 --type q8_0",
                              &out, &err),
            0)
      << err;
  ASSERT_EQ(test::run_command(bin() + " run -m " + file + " -p 'hello world' -n 4 --temp 0 --ignore-eos", &out, &err), 0)
      << err;
  EXPECT_NE(err.find("generated: 4 tokens"), std::string::npos) << err;
  ASSERT_EQ(test::run_command(bin() + " bench engine -m " + file + " -p 8 -n 2 --depth 0,64 --reps 1 -t 1 --json",
                              &out, &err),
            0)
      << err;
  json j = json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["conditions"]["weight_type"], "q8_0");
  ASSERT_EQ(j["results"].size(), 3u);
  expect_summary(j["results"][0]["prefill_tokens_per_s"], "pp8");
  expect_summary(j["results"][2]["decode_tokens_per_s"], "tg2@d64");
  test::run_command("rm -rf " + dir);
}

}  // namespace
}  // namespace hz
