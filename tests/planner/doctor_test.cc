// `horizon doctor` end to end: a healthy model passes; a missing shard, a corrupt GGUF and a busy
// port each fail with a line naming the problem and a non-zero exit.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "planner/model_files.h"
#include "support/test_support.h"

namespace hz {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/configs/" + name; }

// A listening socket on a free loopback port, held for the test's lifetime.
class BusyPort {
 public:
  BusyPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd_, 1) == 0) {
      socklen_t len = sizeof(a);
      getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
    }
  }
  ~BusyPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

int free_port() {
  BusyPort p;  // closed again at return: free for the doctor to bind
  return p.port();
}

std::string line_of(const std::string& out, const std::string& name) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > 6 && line.compare(6, name.size() + 1, name + " ") == 0) return line;
  }
  return "";
}

// Writes a minimal safetensors file: header {"w": F32 [n]} and n floats.
void write_safetensors(const fs::path& p, size_t n, bool truncate = false) {
  std::string header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(n) + "],\"data_offsets\":[0," + std::to_string(4 * n) + "]}}";
  std::ofstream out(p, std::ios::binary);
  uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header;
  std::string data(truncate ? 4 * n / 2 : 4 * n, '\0');
  out << data;
}

std::string make_hf_folder() {
  std::string dir = test::make_temp_dir("doctor-hf");
  fs::copy_file(fixture("llama-3-8b.json"), dir + "/config.json");
  std::ofstream(dir + "/tokenizer.json") << "{}";
  std::ofstream(dir + "/tokenizer_config.json") << "{}";
  std::ofstream(dir + "/generation_config.json") << "{}";
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})";
  write_safetensors(fs::path(dir) / "model-00001-of-00002.safetensors", 16);
  write_safetensors(fs::path(dir) / "model-00002-of-00002.safetensors", 16);
  return dir;
}

TEST(DoctorTest, HealthyGgufPasses) {
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " doctor -m " + test::model_path("stories260K.gguf") +
                                 " --memory 1GiB --port " + std::to_string(free_port()),
                             &out, &err);
  EXPECT_EQ(rc, 0) << out << err;
  for (const char* check : {"cpu", "pages", "cores", "ram", "disk", "model", "plan", "port", "auth"}) {
    EXPECT_FALSE(line_of(out, check).empty()) << "no line for " << check << " in\n" << out;
  }
  EXPECT_EQ(line_of(out, "model").rfind("PASS", 0), 0u) << out;
  EXPECT_EQ(line_of(out, "port").rfind("PASS", 0), 0u) << out;
}

TEST(DoctorTest, CorruptGgufFails) {
  std::string dir = test::make_temp_dir("doctor-gguf");
  std::ifstream in(test::model_path("stories260K.gguf"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir + "/bad.gguf", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " doctor -m " + dir + "/bad.gguf --port " + std::to_string(free_port()), &out, &err);
  EXPECT_NE(rc, 0);
  std::string line = line_of(out, "model");
  EXPECT_EQ(line.rfind("FAIL", 0), 0u) << out;
  EXPECT_NE(line.find("outside"), std::string::npos) << line;  // "data ... lies outside the data section (file truncated?)"
  fs::remove_all(dir);
}

TEST(DoctorTest, MissingShardFails) {
  std::string dir = make_hf_folder();
  auto ok = check_model_files(dir);
  for (const auto& c : ok) EXPECT_NE(c.level, CheckLevel::kFail) << c.name << ": " << c.detail;
  fs::remove(fs::path(dir) / "model-00002-of-00002.safetensors");
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " doctor -m " + dir + " --port " + std::to_string(free_port()), &out, &err);
  EXPECT_NE(rc, 0);
  std::string line = line_of(out, "shards");
  EXPECT_EQ(line.rfind("FAIL", 0), 0u) << out;
  EXPECT_NE(line.find("1 of 2 shards missing: model-00002-of-00002.safetensors"), std::string::npos) << line;
  fs::remove_all(dir);
}

// A pre-quantized checkpoint: the doctor says how it loads, or why it cannot.
TEST(DoctorTest, QuantizationConfigPassesOrFails) {
  std::string dir = make_hf_folder();
  auto with_quant = [&](const nlohmann::json& q) {
    std::ifstream in(fixture("llama-3-8b.json"));
    nlohmann::json config = nlohmann::json::parse(in);
    config["quantization_config"] = q;
    std::ofstream(dir + "/config.json") << config.dump();
    for (const auto& c : check_model_files(dir)) {
      if (c.name == "quant") return c;
    }
    return CheckResult{CheckLevel::kPass, "none", ""};
  };
  CheckResult ok = with_quant({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemm"}});
  EXPECT_EQ(ok.level, CheckLevel::kPass);
  EXPECT_NE(ok.detail.find("AWQ 4-bit, groups of 128"), std::string::npos) << ok.detail;
  CheckResult bad = with_quant({{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}});
  EXPECT_EQ(bad.level, CheckLevel::kFail);
  EXPECT_NE(bad.detail.find("quant_method 'bitsandbytes' is not supported"), std::string::npos) << bad.detail;
  fs::remove_all(dir);
}

// A KV budget that cannot hold one whole context fails (serve would refuse such requests); a
// context beyond the model's without RoPE scaling warns.
TEST(DoctorTest, KvBudgetAndContextBeyondTheModel) {
  std::string out, err;
  const std::string base = std::string(HORIZON_BINARY) + " doctor -m " + test::model_path("stories260K.gguf") + " --port " +
                           std::to_string(free_port());
  EXPECT_NE(test::run_command(base + " --kv-budget 10KiB --max-model-len 512", &out, &err), 0);
  EXPECT_EQ(line_of(out, "kv").rfind("FAIL", 0), 0u) << out;
  EXPECT_NE(line_of(out, "kv").find("holds 16 tokens, less than one sequence of 512"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(base + " --kv-budget 1MiB --max-model-len 512", &out, &err), 0) << out;
  EXPECT_EQ(line_of(out, "kv"), "") << out;
  EXPECT_EQ(test::run_command(base + " --max-model-len 4096", &out, &err), 0) << out;
  EXPECT_EQ(line_of(out, "context").rfind("WARN", 0), 0u) << out;
  EXPECT_EQ(test::run_command(base + " --max-model-len 4096 --rope-scaling linear --rope-freq-scale 0.125", &out, &err), 0) << out;
  EXPECT_EQ(line_of(out, "context"), "") << out;
}

TEST(DoctorTest, TruncatedShardAndMissingTokenizerFail) {
  std::string dir = make_hf_folder();
  write_safetensors(fs::path(dir) / "model-00001-of-00002.safetensors", 16, /*truncate=*/true);
  fs::remove(fs::path(dir) / "tokenizer.json");
  auto checks = check_model_files(dir);
  bool shard_fail = false, tok_fail = false;
  for (const auto& c : checks) {
    shard_fail |= c.name == "shards" && c.level == CheckLevel::kFail && c.detail.find("outside") != std::string::npos;
    tok_fail |= c.name == "tokenizer" && c.level == CheckLevel::kFail;
  }
  EXPECT_TRUE(shard_fail);
  EXPECT_TRUE(tok_fail);
  fs::remove_all(dir);
}

TEST(DoctorTest, BusyPortFails) {
  BusyPort busy;
  ASSERT_GT(busy.port(), 0);
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " doctor --port " + std::to_string(busy.port()), &out, &err);
  EXPECT_NE(rc, 0);
  std::string line = line_of(out, "port");
  EXPECT_EQ(line.rfind("FAIL", 0), 0u) << out;
  EXPECT_NE(line.find("already in use"), std::string::npos) << line;
}

TEST(DoctorTest, WarnsWithoutApiKeyBeyondLoopback) {
  std::string out;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " doctor --host 0.0.0.0 --port " + std::to_string(free_port()), &out);
  EXPECT_EQ(rc, 0) << out;  // a warning, not a failure
  EXPECT_EQ(line_of(out, "auth").rfind("WARN", 0), 0u) << out;
  rc = test::run_command(std::string(HORIZON_BINARY) + " doctor --host 0.0.0.0 --api-key k --port " + std::to_string(free_port()), &out);
  EXPECT_EQ(line_of(out, "auth").rfind("PASS", 0), 0u) << out;
}

TEST(DoctorTest, PlanThatDoesNotFitFails) {
  std::string out;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " doctor -m " + test::model_path("stories260K.gguf") +
                                 " --memory 32MiB --port " + std::to_string(free_port()),
                             &out);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(line_of(out, "plan").rfind("FAIL", 0), 0u) << out;
}

}  // namespace
}  // namespace hz
