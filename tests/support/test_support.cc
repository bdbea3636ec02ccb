#include "support/test_support.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace hz::test {

std::string shared_dir() {
  const char* env = std::getenv("HORIZON_SHARED_DIR");
  if (env != nullptr && *env != '\0') return env;
  return HORIZON_SHARED_DIR_DEFAULT;
}

std::string model_path(const std::string& file) { return shared_dir() + "/models/" + file; }
std::string testdata_path(const std::string& rel) { return shared_dir() + "/testdata/" + rel; }

namespace {

// The folders make_temp_dir created, removed when the test process exits (not by a forked child:
// its parent still uses them; and kept with HORIZON_KEEP_TEST_TEMP=1 for a post-mortem), so
// repeated runs do not fill /tmp.
struct TempDirs {
  const pid_t owner = getpid();
  std::mutex mu;
  std::vector<std::string> dirs;
  ~TempDirs() {
    const char* keep = std::getenv("HORIZON_KEEP_TEST_TEMP");
    if (getpid() != owner || (keep != nullptr && *keep != '\0' && *keep != '0')) return;
    std::error_code ec;
    for (const std::string& d : dirs) std::filesystem::remove_all(d, ec);
  }
};

TempDirs& temp_dirs() {
  static TempDirs t;
  return t;
}

}  // namespace

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/hz-" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* p = mkdtemp(buf.data());
  if (p == nullptr) return std::string();
  TempDirs& t = temp_dirs();
  std::lock_guard<std::mutex> lk(t.mu);
  t.dirs.emplace_back(p);
  return p;
}

std::string chat_template_fixture(const std::string& name) {
  std::ifstream in(std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/chat_templates/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run_command(const std::string& cmd, std::string* out, std::string* err) {
  std::string dir = make_temp_dir("cmd");
  std::string full = cmd + " >" + dir + "/out 2>" + dir + "/err </dev/null";
  int rc = std::system(full.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  if (out) *out = slurp(dir + "/out");
  if (err) *err = slurp(dir + "/err");
  std::system(("rm -rf " + dir).c_str());
  if (rc == -1) return -1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

}  // namespace hz::test
