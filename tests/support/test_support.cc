#include "support/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hz::test {

std::string shared_dir() {
  const char* env = std::getenv("HORIZON_SHARED_DIR");
  if (env != nullptr && *env != '\0') return env;
  return HORIZON_SHARED_DIR_DEFAULT;
}

std::string model_path(const std::string& file) { return shared_dir() + "/models/" + file; }
std::string testdata_path(const std::string& rel) { return shared_dir() + "/testdata/" + rel; }

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/hz-" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* p = mkdtemp(buf.data());
  return p ? std::string(p) : std::string();
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
