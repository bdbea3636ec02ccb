#include "support/server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "support/test_support.h"

namespace hz::test {

ServerProcess::ServerProcess(const std::vector<std::string>& args) {
  std::string dir = make_temp_dir("serve");
  log_path_ = dir + "/server.log";
  pid_ = fork();
  if (pid_ == 0) {
    FILE* f = std::fopen(log_path_.c_str(), "w");
    if (f != nullptr) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<std::string> argv_s = {HORIZON_BINARY, "serve"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    argv_s.push_back("--port");
    argv_s.push_back("0");
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const std::regex addr(R"(on http://127\.0\.0\.1:(\d+))");
  for (int i = 0; i < 600; ++i) {
    std::smatch m;
    std::string l = log();
    if (std::regex_search(l, m, addr)) {
      port_ = std::stoi(m[1]);
      return;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) terminate(10);
}

std::string ServerProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int ServerProcess::terminate(int timeout_s) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  for (int i = 0; i < timeout_s * 20; ++i) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

int http_request(const std::string& method, const std::string& url, const std::string& json_body, std::string* body) {
  std::string dir = make_temp_dir("http");
  std::string cmd = "curl -s -o " + dir + "/body -w '%{http_code}' -X " + method + " '" + url + "'";
  if (!json_body.empty()) {
    std::ofstream(dir + "/req") << json_body;
    cmd += " -H 'Content-Type: application/json' --data-binary @" + dir + "/req";
  }
  std::string code;
  run_command(cmd, &code);
  std::ifstream in(dir + "/body");
  std::stringstream ss;
  ss << in.rdbuf();
  if (body) *body = ss.str();
  run_command("rm -rf " + dir);
  return code.empty() ? 0 : std::atoi(code.c_str());
}

}  // namespace hz::test
