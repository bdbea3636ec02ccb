// `horizon serve` with several API keys (--api-key a,b and --api-key-file), a per-key rate limit
// (--rate-limit) and the flags' errors, through the binary and curl.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

struct Reply {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

Reply post(const test::ServerProcess& srv, const std::string& key) {
  const std::string dir = test::make_temp_dir("keys_curl");
  std::string cmd = "curl -s -D " + dir + "/head -o " + dir + "/body -w '%{http_code}' -H 'Content-Type: application/json'";
  if (!key.empty()) cmd += " -H 'Authorization: Bearer " + key + "'";
  cmd += " -d '{\"prompt\": \"Once\", \"max_tokens\": 2}' " + srv.base_url() + "/v1/completions";
  Reply r;
  std::string out;
  EXPECT_EQ(test::run_command(cmd, &out), 0);
  r.status = out.empty() ? 0 : std::stoi(out);
  std::ifstream h(dir + "/head"), b(dir + "/body");
  r.head.assign(std::istreambuf_iterator<char>(h), std::istreambuf_iterator<char>());
  r.body.assign(std::istreambuf_iterator<char>(b), std::istreambuf_iterator<char>());
  return r;
}

TEST(ApiKeysE2eTest, KeysFromTheFlagAndTheFileEachWithTheirOwnLimit) {
  const std::string dir = test::make_temp_dir("keys");
  std::ofstream(dir + "/keys") << "# team keys\n\n  file-key-1  \nfile-key-2\n";
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--api-key", "flag-a,flag-b",
                           "--api-key-file", dir + "/keys", "--rate-limit", "1"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  for (const char* key : {"flag-a", "flag-b", "file-key-1", "file-key-2"}) {
    const Reply first = post(srv, key);
    EXPECT_EQ(first.status, 200) << key << " " << first.body;
    const Reply second = post(srv, key);
    EXPECT_EQ(second.status, 429) << key << " " << second.body;
    EXPECT_NE(second.head.find("Retry-After: 60"), std::string::npos) << second.head;
  }
  EXPECT_EQ(post(srv, "").status, 401);
  EXPECT_EQ(post(srv, "# team keys").status, 401);  // a comment is not a key
  EXPECT_EQ(post(srv, "file-key-3").status, 401);
}

TEST(ApiKeysE2eTest, BadKeyFlagsAreRefusedAtStart) {
  std::string out, err;
  const std::string bin = HORIZON_BINARY;
  const std::string model = test::model_path("stories260K.gguf");
  EXPECT_NE(test::run_command(bin + " serve -m " + model + " --port 0 --api-key-file /nonexistent/keys", &out, &err), 0);
  EXPECT_NE(err.find("--api-key-file: /nonexistent/keys"), std::string::npos) << err;
  const std::string dir = test::make_temp_dir("keys");
  std::ofstream(dir + "/empty") << "# nothing here\n";
  EXPECT_NE(test::run_command(bin + " serve -m " + model + " --port 0 --api-key-file " + dir + "/empty", &out, &err), 0);
  EXPECT_NE(err.find("lists no key"), std::string::npos) << err;
  EXPECT_NE(test::run_command(bin + " serve -m " + model + " --port 0 --rate-limit -3", &out, &err), 0);
}

}  // namespace
}  // namespace hz
