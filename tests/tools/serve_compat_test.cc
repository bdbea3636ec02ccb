// Command lines written for vLLM and llama-server run unchanged (binary name aside): the server
// starts, answers /health and a completion, and maps each flag to its meaning here.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "support/test_support.h"

namespace hz {
namespace {

std::string bin() { return HORIZON_BINARY; }
std::string model() { return test::model_path("stories260K.gguf"); }

// A port that was free a moment ago (the kernel does not hand it out again at once).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `horizon <args>` (a shell command line) in the background until destroyed.
class Server {
 public:
  explicit Server(const std::string& args) {
    log_ = test::make_temp_dir("compat") + "/server.log";
    pid_ = fork();
    if (pid_ == 0) {
      std::string cmd = "exec " + bin() + " " + args + " > " + log_ + " 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 600 && !up(); ++i) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Server() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  bool up() const { return log().find("horizon is serving") != std::string::npos; }
  std::string log() const { return read_all(log_); }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

std::string curl(const std::string& args) {
  std::string out;
  test::run_command("curl -s --max-time 30 " + args, &out);
  return out;
}

TEST(ServeCompatTest, VllmCommandLineRunsUnchanged) {
  std::string dir = test::make_temp_dir("compat-vllm");
  // A template file of the kind vLLM users pass (a Qwen2 template from the fixtures).
  std::string tmpl = std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/chat_templates/Qwen-Qwen2-0.5B-Instruct.jinja";
  const int port = free_port();
  Server s("serve " + model() + " --host localhost --port " + std::to_string(port) +
           " --max-model-len 4096 --max-num-seqs 8 --kv-cache-dtype fp8 --enable-prefix-caching --served-model-name m"
           " --api-key k --gpu-memory-utilization 0.9 --chat-template " + tmpl + " --generation-config auto"
           " --dtype auto --trust-remote-code --enforce-eager");
  ASSERT_TRUE(s.up()) << s.log();
  const std::string base = "http://localhost:" + std::to_string(port);
  EXPECT_NE(curl(base + "/health").find("ok"), std::string::npos);
  std::string out = curl("-H 'Authorization: Bearer k' -H 'Content-Type: application/json' " + base +
                         "/v1/chat/completions -d '{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                         "\"max_tokens\":4}'");
  EXPECT_NE(out.find("\"model\":\"m\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"completion_tokens\":4"), std::string::npos) << out;
  // Without the key: refused.
  EXPECT_NE(curl(base + "/v1/models").find("error"), std::string::npos);
  const std::string log = s.log();
  EXPECT_NE(log.find("context        4096 tokens per sequence"), std::string::npos) << log;
  EXPECT_NE(log.find("KV cache       fp8"), std::string::npos) << log;
  EXPECT_NE(log.find("prefix caching on"), std::string::npos) << log;
  EXPECT_NE(log.find("max sequences  8"), std::string::npos) << log;
  EXPECT_NE(log.find("chat template  " + tmpl), std::string::npos) << log;
  EXPECT_NE(log.find("URL            http://127.0.0.1:" + std::to_string(port)), std::string::npos) << log;
  EXPECT_NE(log.find("--gpu-memory-utilization has no effect"), std::string::npos) << log;
  EXPECT_NE(log.find("--trust-remote-code has no effect"), std::string::npos) << log;
  EXPECT_NE(log.find("--enforce-eager has no effect"), std::string::npos) << log;
  EXPECT_EQ(log.find("api-key: k"), std::string::npos) << "the key must not be printed";
}

TEST(ServeCompatTest, LlamaServerCommandLineRunsUnchanged) {
  const int port = free_port();
  Server s("serve -m " + model() + " -c 8192 -np 4 -t 2 --host 127.0.0.1 --port " + std::to_string(port) +
           " -ctk q8_0 -ctv q8_0 -fa on --jinja --metrics -ngl 0 -cb --alias tiny");
  ASSERT_TRUE(s.up()) << s.log();
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  EXPECT_NE(curl(base + "/health").find("ok"), std::string::npos);
  std::string out = curl("-H 'Content-Type: application/json' " + base +
                         "/v1/completions -d '{\"prompt\":\"Once upon\",\"max_tokens\":4}'");
  EXPECT_NE(out.find("\"completion_tokens\":4"), std::string::npos) << out;
  EXPECT_NE(out.find("\"model\":\"tiny\""), std::string::npos) << out;  // --alias names the model
  const std::string log = s.log();
  // -c is the context of all slots together: 8192 / 4 per sequence.
  EXPECT_NE(log.find("context        2048 tokens per sequence"), std::string::npos) << log;
  EXPECT_NE(log.find("KV cache       int8"), std::string::npos) << log;
  EXPECT_NE(log.find("max sequences  4"), std::string::npos) << log;
  EXPECT_NE(log.find("threads        2"), std::string::npos) << log;
  for (const char* flag : {"--jinja has no effect", "--metrics has no effect", "-fa/--flash-attn has no effect",
                           "-ngl/--n-gpu-layers has no effect", "--cont-batching has no effect"}) {
    size_t first = log.find(flag);
    EXPECT_NE(first, std::string::npos) << flag << "\n" << log;
    EXPECT_EQ(log.find(flag, first + 1), std::string::npos) << "one warning each: " << flag;
  }
}

TEST(ServeCompatTest, LlamaServerSplitKvTypesServe) {
  // -ctk and -ctv apart: keys in 8 bits, values exact, as llama-server users write it.
  const int port = free_port();
  Server s("serve -m " + model() + " -ctk q8_0 -ctv f16 --host 127.0.0.1 --port " + std::to_string(port));
  ASSERT_TRUE(s.up()) << s.log();
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  std::string out = curl("-H 'Content-Type: application/json' " + base +
                         "/v1/completions -d '{\"prompt\":\"Once upon\",\"max_tokens\":4}'");
  EXPECT_NE(out.find("\"completion_tokens\":4"), std::string::npos) << out;
  EXPECT_NE(s.log().find("KV cache       K int8 / V f16"), std::string::npos) << s.log();
}

struct BadCase {
  std::string args;
  std::string expect;
};

TEST(ServeCompatTest, MismatchesAndForeignFlagsGetClearErrors) {
  const std::vector<BadCase> cases = {
      {"serve -m " + model() + " -ctk q9_9 -ctv f16", "'q9_9' is not one of auto, f32, f16"},
      {"serve -m " + model() + " -ctv int2", "too lossy for every position"},
      {"serve -m " + model() + " -c 100 --max-model-len 50", "give one"},
      {"serve -m " + model() + " --swap-space 4", "--kv-disk-dir"},
      {"serve -m " + model() + " --tensor-parallel-size 2", "--tensor-parallel-size: one process"},
      {"serve -m " + model() + " -b 256", "--max-num-batched-tokens"},
      {"serve -m " + model() + " --chat-template-file x.jinja", "--chat-template FILE"},
      {"serve -m " + model() + " --chat-template nosuch", "built-in name (chatml"},
      {"serve -m " + model() + " --host no-such-host.invalid", "--host 'no-such-host.invalid': cannot resolve"},
      {"serve -m " + model() + " --generation-config /tmp", "--generation-config"},
      {"serve -m " + model() + " -fa sometimes", "sometimes"},
      {"serve -m " + model() + " --dtype float16", "--dtype float16: weights keep the file's types"},
      {"serve -m " + model() + " --mlock", "memory-mapped"},
      {"serve " + model() + " -m /elsewhere.gguf", "the model is given twice"},
      {"serve --port 0", "no model"},
      {"serve -m " + model() + " --reasoning-parser gpt_oss", "'gpt_oss' is not auto, none or a known reasoning parser"},
      {"serve -m " + model() + " --reasoning-format deepseek --reasoning-parser none", "disagree"},
      {"serve -m " + model() + " --reasoning-format json", "--reasoning-format"},
      {"run -m " + model() + " -p hi -cnv", "use `horizon chat -m MODEL`"},
      {"serve -m " + model() + " -to 30", "--timeout: use --request-timeout"},
      {"server " + model(), "'server' is not a horizon command (did you mean 'serve'?)"},
      {"perp -m " + model(), "did you mean 'perplexity'?"},
      {"xyzzy", "'xyzzy' is not a horizon command (horizon --help"},
      {"serve -m " + model() + " --request-timeout -1", "--request-timeout: '-1' must be 0 or more"},
      {"serve -m " + model() + " --max-body-bytes 0", "at least 1024"},
      {"serve -m " + model() + " --idle-timeout 0", "--idle-timeout: '0' must be more than 0"},
      {"serve -m " + model() + " --max-queue -1", "--max-queue must be 0 or more"},
      // Named in the order typed (the parser reads them reversed).
      {"serve -m " + model() + " --swap-space 4 --tensor-parallel-size 2", "not expected: --swap-space"},
  };
  for (const auto& c : cases) {
    std::string out, err;
    // Bounded: a case that is (wrongly) accepted starts a server, which must fail here, not hang.
    int rc = test::run_command("timeout 60 " + bin() + " " + c.args, &out, &err);
    EXPECT_NE(rc, 0) << c.args;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.args << ": " << err;
  }
}

// vLLM's tool-calling flags describe what the server always does: accepted with one warning each.
TEST(ServeCompatTest, VllmToolFlagsAreAcceptedWithAWarning) {
  std::string out, err;
  // A bad block size stops serve after its flags are resolved.
  test::run_command(bin() + " serve -m " + model() + " --enable-auto-tool-choice --tool-call-parser hermes --block-size 17", &out, &err);
  EXPECT_NE(err.find("--enable-auto-tool-choice has no effect"), std::string::npos) << err;
  EXPECT_NE(err.find("--tool-call-parser hermes has no effect"), std::string::npos) << err;
  EXPECT_NE(err.find("--block-size 17"), std::string::npos) << err;
  // The reasoning flags are taken (the block size is what stops it).
  test::run_command(bin() + " serve -m " + model() + " --reasoning-parser deepseek_r1 --reasoning-format deepseek --block-size 17",
                    &out, &err);
  EXPECT_EQ(err.find("reasoning"), std::string::npos) << err;
  EXPECT_NE(err.find("--block-size 17"), std::string::npos) << err;
  ASSERT_EQ(test::run_command(bin() + " help", &out, &err), 0);
  EXPECT_NE(out.find("serve"), std::string::npos) << out;
}

// A flag given twice (or under two of its names) takes the last value, as in llama.cpp's tools;
// repeatable flags keep every value.
TEST(ServeCompatTest, AFlagGivenTwiceTakesTheLastValue) {
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + " run -m " + model() + " -p Once -t 1 -n 1 -n 3 --temp 0.9 --temperature 0", &out,
                              &err),
            0)
      << err;
  EXPECT_NE(err.find("generated: 3 tokens"), std::string::npos) << err;
  ASSERT_EQ(test::run_command(bin() + " run -m " + model() + " -p Once -t 1 -n 8 --temp 0 --stop ' time' --stop zzz", &out,
                              &err),
            0)
      << err;
  EXPECT_NE(err.find("stop: stop"), std::string::npos) << err;
}

TEST(ServeCompatTest, NonLoopbackWithoutKeyWarns) {
  // Resolves and warns before loading anything; a bad block size then stops it.
  std::string out, err;
  test::run_command(bin() + " serve -m " + model() + " --host 0.0.0.0 --block-size 17", &out, &err);
  EXPECT_NE(err.find("no --api-key is set"), std::string::npos) << err;
  test::run_command(bin() + " serve -m " + model() + " --host 0.0.0.0 --api-key k --block-size 17", &out, &err);
  EXPECT_EQ(err.find("no --api-key is set"), std::string::npos) << err;
}

}  // namespace
}  // namespace hz
