// `horizon kv ls|stats|clear`: lists a store written through the KvStore API, verifies records
// (a flipped byte is reported), refuses to clear a store in use, clears, and errors on no store.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "kvstore/kv_store.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::string horizon(const std::string& args, std::string* out, std::string* err) {
  int rc = test::run_command(std::string(HORIZON_BINARY) + " " + args, out, err);
  return std::to_string(rc);
}

kvstore::StoreOptions options(const std::string& dir) {
  kvstore::StoreOptions o;
  o.dir = dir;
  o.fingerprint = {1, 2};
  o.block_tokens = 16;
  o.block_bytes = 4096;
  o.budget_bytes = 1 << 20;
  return o;
}

TEST(KvTool, LsStatsVerifyClear) {
  const std::string dir = test::make_temp_dir("hz_kvtool");
  uint64_t slot_bytes = 0;
  {
    auto s = kvstore::KvStore::open(options(dir));
    ASSERT_TRUE(s.ok());
    std::vector<uint8_t> raw(4096);
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>(i * 2654435761u >> 13);  // byte 200 is payload
    std::vector<int32_t> t(16, 3);
    for (uint64_t h = 1; h <= 3; ++h) ASSERT_TRUE((*s)->put(h, h - 1, 1, t.data(), raw.data()).ok());
    slot_bytes = (*s)->slot_bytes();
    // In use: clear refuses.
    std::string out, err;
    EXPECT_EQ(horizon("kv clear --kv-disk-dir " + dir, &out, &err), "1");
    EXPECT_NE(err.find("in use"), std::string::npos) << err;
  }
  std::string out, err;
  ASSERT_EQ(horizon("kv ls --kv-disk-dir " + dir, &out, &err), "0") << err;
  EXPECT_NE(out.find("3 blocks"), std::string::npos) << out;
  EXPECT_NE(out.find("0000000000000002 0000000000000001"), std::string::npos) << out;
  ASSERT_EQ(horizon("kv stats --verify --kv-disk-dir " + dir, &out, &err), "0") << err;
  EXPECT_NE(out.find("verified     3 records, 0 bad"), std::string::npos) << out;
  EXPECT_NE(out.find("f16: 3 blocks"), std::string::npos) << out;
  // Flip a payload byte of slot 1.
  int fd = ::open(kvstore::store_data_path(dir).c_str(), O_RDWR);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(slot_bytes + 200)), 1);
  b ^= 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(slot_bytes + 200)), 1);
  ::close(fd);
  ASSERT_EQ(horizon("kv stats --verify --kv-disk-dir " + dir, &out, &err), "0") << err;
  EXPECT_NE(out.find("1 bad"), std::string::npos) << out;
  EXPECT_NE(out.find("checksum"), std::string::npos) << out;
  ASSERT_EQ(horizon("kv clear --kv-disk-dir " + dir, &out, &err), "0") << err;
  EXPECT_EQ(horizon("kv ls --kv-disk-dir " + dir, &out, &err), "1");
  EXPECT_NE(err.find("no KV store"), std::string::npos) << err;
  EXPECT_EQ(horizon("kv stats", &out, &err), "1") << err;  // a store is required: a disk folder or a Redis
  EXPECT_NE(err.find("--kv-disk-dir DIR, --kv-remote URL"), std::string::npos) << err;
}

}  // namespace
}  // namespace hz
