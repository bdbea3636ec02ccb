// One set of engine flags with one meaning across subcommands: plan and doctor take the spellings
// serve takes (old spellings kept as aliases), doctor takes a whole serve command line, and
// --config FILE holds any flag with the command line overriding it.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace hz {
namespace {

std::string bin() { return HORIZON_BINARY; }
std::string model() { return test::model_path("stories260K.gguf"); }

nlohmann::json plan_json(const std::string& args) {
  std::string out, err;
  int rc = test::run_command(bin() + " plan " + model() + " --memory 1GiB --json " + args, &out, &err);
  EXPECT_EQ(rc, 0) << args << ": " << err;
  return rc == 0 ? nlohmann::json::parse(out) : nlohmann::json();
}

TEST(EngineFlagsCliTest, PlanTakesServeSpellingsAndKeepsTheOldOnes) {
  auto serve_spelling = plan_json("--block-size 32 --max-num-seqs 4");
  auto old_spelling = plan_json("--kv-block-size 32 --max-num-seqs 4");
  EXPECT_EQ(serve_spelling.dump(), old_spelling.dump());
  EXPECT_NE(serve_spelling.dump(), plan_json("--block-size 16 --max-num-seqs 4").dump());
  // llama-server's -c (all sequences together) means the same to plan as to serve.
  EXPECT_EQ(plan_json("-c 1024 -np 4").dump(), plan_json("--max-model-len 256 --max-num-seqs 4").dump());
}

// In the one-sequence commands -c is the context, as llama-cli's and llama-perplexity's: not shared
// by serve's 16 sequences.
TEST(EngineFlagsCliTest, CtxSizeIsTheContextOfOneSequenceCommands) {
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + " run -m " + model() + " -p Once -n 60 --temp 0 -t 1 -c 128", &out, &err), 0) << err;
  EXPECT_NE(err.find("generated: 60 tokens"), std::string::npos) << err;
  // -n -1 runs to the end of the context (llama.cpp's meaning); -f - reads the prompt from stdin.
  ASSERT_EQ(test::run_command("(echo Once | " + bin() + " run -m " + model() + " -f - -n -1 --temp 0 -t 1 -c 40)", &out, &err), 0) << err;
  EXPECT_NE(err.find("prompt: 3 tokens"), std::string::npos) << err;  // BOS, "Once", the newline
  EXPECT_NE(err.find("generated: 37 tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("stop: length"), std::string::npos) << err;
  std::string by_c, by_ctx;
  const std::string text = test::testdata_path("corpus/stories260K-samples.txt");
  ASSERT_EQ(test::run_command(bin() + " perplexity -m " + model() + " -f " + text + " -t 1 -c 64", &by_c, &err), 0) << err;
  ASSERT_EQ(test::run_command(bin() + " perplexity -m " + model() + " -f " + text + " -t 1 --ctx 64", &by_ctx, &err), 0) << err;
  EXPECT_NE(by_c.find("ctx 64 |"), std::string::npos) << by_c;
  // The same windows, the same perplexity (the timing differs).
  EXPECT_EQ(by_c.substr(by_c.find("perplexity:")), by_ctx.substr(by_ctx.find("perplexity:")));
}

TEST(EngineFlagsCliTest, ColdTypeDefaultsToInt8Everywhere) {
  // The engine keeps blocks beyond the window in int8 unless told; the plan assumes the same.
  auto def = plan_json("--kv-cache-dtype f16 --kv-hot-window 64");
  auto int8 = plan_json("--kv-cache-dtype f16 --kv-hot-window 64 --kv-cold-dtype int8");
  EXPECT_EQ(def.dump(), int8.dump());
  EXPECT_NE(def.dump(), plan_json("--kv-cache-dtype f16 --kv-hot-window 64 --kv-cold-dtype int4").dump());
}

TEST(EngineFlagsCliTest, KeyAndValueTypesApartAndLlamaCppSpellings) {
  // -ctk / -ctv (llama-server) are --kv-cache-dtype-k / -v; the one not given is f16, as there.
  auto split = plan_json("--kv-cache-dtype-k int8 --kv-cache-dtype-v int4");
  EXPECT_EQ(split["requested"]["kv_cache_dtype"], "K int8 / V int4");
  EXPECT_EQ(plan_json("-ctk q8_0 -ctv q4_0").dump(), split.dump());
  EXPECT_EQ(plan_json("-ctk q8_0")["requested"]["kv_cache_dtype"], "K int8 / V f16");
  // --kv-cache-dtype sets both, -k / -v override one; the same type twice is the plain type.
  EXPECT_EQ(plan_json("--kv-cache-dtype int4 --kv-cache-dtype-k int8").dump(), split.dump());
  EXPECT_EQ(plan_json("-ctk q8_0 -ctv q8_0").dump(), plan_json("--kv-cache-dtype int8").dump());
  const double split_bpt = split["requested"]["kv_bytes_per_token"];
  const double i8 = plan_json("--kv-cache-dtype int8")["requested"]["kv_bytes_per_token"];
  const double i4 = plan_json("--kv-cache-dtype int4")["requested"]["kv_bytes_per_token"];
  EXPECT_DOUBLE_EQ(split_bpt, (i8 + i4) / 2);
  auto cold = plan_json("--kv-hot-window 32 --kv-cold-dtype-k int3 --kv-cold-dtype-v int2");
  EXPECT_EQ(cold["requested"]["kv_cold_dtype"], "K int3 / V int2");
  // Errors name the flag that was given.
  std::string out, err;
  EXPECT_NE(test::run_command(bin() + " run -p hi -m " + model() + " --kv-cold-dtype-v int2", &out, &err), 0);
  EXPECT_NE(err.find("--kv-cold-dtype-v needs --kv-hot-window"), std::string::npos) << err;
  EXPECT_NE(test::run_command(bin() + " run -p hi -m " + model() + " -ctv int2", &out, &err), 0);
  EXPECT_NE(err.find("--kv-cache-dtype-v int2 is too lossy"), std::string::npos) << err;
  // A run with separate types answers.
  ASSERT_EQ(test::run_command(bin() + " run -p 'Once upon a time' -n 8 --temp 0 -t 1 -m " + model() +
                                  " --kv-cache-dtype-k int8c --kv-cache-dtype-v int4c",
                              &out, &err),
            0)
      << err;
  EXPECT_FALSE(out.empty());
}

TEST(EngineFlagsCliTest, BadBlockSizeSameErrorForPlanAndRun) {
  for (const char* cmd : {" plan ", " run -p hi -m "}) {
    std::string out, err;
    EXPECT_NE(test::run_command(bin() + cmd + model() + " --block-size 24", &out, &err), 0);
    EXPECT_NE(err.find("--block-size 24 must be a multiple of 16"), std::string::npos) << cmd << err;
  }
}

TEST(EngineFlagsCliTest, SpeculationFlagsAreCheckedAndRunReportsAcceptance) {
  std::string out, err;
  EXPECT_NE(test::run_command(bin() + " run -p hi -m " + model() + " --spec eagle", &out, &err), 0);
  EXPECT_NE(err.find("--spec 'eagle' is not one of off, ngram"), std::string::npos) << err;
  EXPECT_NE(test::run_command(bin() + " run -p hi -m " + model() + " --spec ngram --spec-draft 0", &out, &err), 0);
  EXPECT_NE(err.find("--spec-draft 0 must be between 1 and 64"), std::string::npos) << err;
  const std::string p = " -p 'Tom had a red ball. Tom had a red ball. Tom had a red ball. Tom' -n 24 --temp 0 -t 1";
  std::string plain, spec;
  ASSERT_EQ(test::run_command(bin() + " run -m " + model() + p, &plain, &err), 0) << err;
  ASSERT_EQ(test::run_command(bin() + " run -m " + model() + p + " --spec ngram", &spec, &err), 0) << err;
  EXPECT_EQ(spec, plain);
  EXPECT_NE(err.find("speculation: "), std::string::npos) << err;
  EXPECT_NE(err.find(" tokens drafted, "), std::string::npos) << err;
}

TEST(EngineFlagsCliTest, DoctorChecksAServeCommandLineAsIs) {
  std::string out, err;
  int rc = test::run_command(bin() + " doctor -m " + model() +
                                 " -c 8192 -np 4 -t 2 --host 127.0.0.1 --port 0 -ctk q8_0 -ctv q8_0 -fa on --jinja --metrics"
                                 " -ngl 0 --enable-prefix-caching --served-model-name m --chat-template chatml",
                             &out, &err);
  EXPECT_NE(out.find("4 sequence(s) x 2048 tokens at int8 rotated KV"), std::string::npos) << out << err;
  (void)rc;  // port 0 is not a port to check: its FAIL line is expected
  rc = test::run_command(bin() + " doctor -m " + model() + " --port 0 --kv-cache-dtype f13", &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("FAIL  flags"), std::string::npos) << out;
  EXPECT_NE(out.find("--kv-cache-dtype"), std::string::npos) << out;
}

TEST(EngineFlagsCliTest, ConfigFileHoldsAnyFlagAndTheCommandLineWins) {
  std::string dir = test::make_temp_dir("config");
  std::string cfg = dir + "/horizon.yaml";
  std::ofstream(cfg) << "# a deployment\nmodel: " << model()
                     << "\nmax_model_len: 256\nmax-num-seqs: 4\nkv-cache-dtype: int8\nblock-size: 32\nmemory: 1GiB\njson: true\n";
  std::string from_file, overridden, err;
  ASSERT_EQ(test::run_command(bin() + " plan --config " + cfg, &from_file, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(from_file).dump(),
            plan_json("--max-model-len 256 --max-num-seqs 4 --kv-cache-dtype int8 --block-size 32").dump());
  ASSERT_EQ(test::run_command(bin() + " plan --config " + cfg + " --max-num-seqs 2", &overridden, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(overridden).dump(),
            plan_json("--max-model-len 256 --max-num-seqs 2 --kv-cache-dtype int8 --block-size 32").dump());

  // Unknown keys are named, all of them; bad YAML and bad values are errors too.
  std::ofstream(dir + "/bad.yaml") << "max-model-len: 256\nmax-num-seq: 4\nkv_cache_type: int8\n";
  std::string out;
  EXPECT_NE(test::run_command(bin() + " serve --config " + dir + "/bad.yaml", &out, &err), 0);
  EXPECT_NE(err.find("unknown keys max-num-seq, kv_cache_type"), std::string::npos) << err;
  std::ofstream(dir + "/list.yaml") << "- a\n- b\n";
  EXPECT_NE(test::run_command(bin() + " serve --config " + dir + "/list.yaml", &out, &err), 0);
  EXPECT_NE(err.find("mapping"), std::string::npos) << err;
  std::ofstream(dir + "/syntax.yaml") << "max-model-len: [256\n";
  EXPECT_NE(test::run_command(bin() + " serve --config " + dir + "/syntax.yaml", &out, &err), 0);
  EXPECT_NE(err.find("not valid YAML"), std::string::npos) << err;
  std::ofstream(dir + "/value.yaml") << "model: " << model() << "\nkv-cache-dtype: f13\n";
  EXPECT_NE(test::run_command(bin() + " serve --config " + dir + "/value.yaml", &out, &err), 0);
  EXPECT_NE(err.find("--kv-cache-dtype 'f13'"), std::string::npos) << err;
  EXPECT_NE(test::run_command(bin() + " serve --config " + dir + "/missing.yaml", &out, &err), 0);
  EXPECT_NE(err.find("missing.yaml"), std::string::npos) << err;
}

TEST(EngineFlagsCliTest, ServePrintsTheEffectiveConfigurationUsableAsAFile) {
  std::string dir = test::make_temp_dir("config-serve");
  std::ofstream(dir + "/a.yaml") << "model: " << model() << "\nmax-model-len: 128\nenable-prefix-caching: true\nport: 0\n";
  // A KV budget of 10 bytes stops serve after the configuration is printed (no block fits).
  std::string out, err;
  EXPECT_NE(test::run_command(bin() + " serve --config " + dir + "/a.yaml --max-num-seqs 3 --kv-cache-dtype int8 --kv-budget 10",
                              &out, &err),
            0);
  for (const char* line : {"  max-model-len: 128", "  enable-prefix-caching: true", "  max-num-seqs: 3", "  kv-cache-dtype: int8"}) {
    EXPECT_NE(err.find(line), std::string::npos) << line << "\n" << err;
  }
  EXPECT_NE(err.find("effective configuration"), std::string::npos) << err;
  // No key: no api-key line (a placeholder read back would become the key).
  EXPECT_EQ(err.find("api-key"), std::string::npos) << err;
  // A key: said to be set, never printed.
  EXPECT_NE(test::run_command(bin() + " serve --config " + dir + "/a.yaml --api-key sekrit --kv-budget 10", &out, &err), 0);
  EXPECT_NE(err.find("# api-key: set (not printed)"), std::string::npos) << err;
  EXPECT_EQ(err.find("sekrit"), std::string::npos) << err;
}

}  // namespace
}  // namespace hz
