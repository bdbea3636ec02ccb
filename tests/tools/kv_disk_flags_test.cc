// The --kv-disk-* flags: bad values are refused with an error naming the flag (before any model
// work where possible); an unusable folder only turns the disk tier off (warning), the run succeeds.
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace hz {
namespace {

int horizon_run(const std::string& flags, std::string* err) {
  std::string out;
  return test::run_command(std::string(HORIZON_BINARY) + " run -m " + test::model_path("stories260K.gguf") +
                               " -p 'Once upon a time' -n 2 --temp 0 -t 1 " + flags,
                           &out, err);
}

TEST(KvDiskFlags, BadValuesNameTheFlag) {
  const std::string dir = test::make_temp_dir("hz_kvflags");
  struct Case {
    std::string flags, expect;
  };
  const Case cases[] = {
      {"--kv-disk-dir " + dir + " --kv-disk-budget 12parsecs", "--kv-disk-budget"},
      {"--kv-disk-dir " + dir + " --kv-disk-budget 0", "--kv-disk-budget"},
      {"--kv-disk-dir " + dir + " --kv-disk-budget 1KiB", "--kv-disk-budget"},  // smaller than one block
      {"--kv-disk-dir " + dir + " --kv-disk-codec brotli", "--kv-disk-codec"},
      {"--kv-disk-dir " + dir + " --kv-disk-policy mru", "--kv-disk-policy"},
      {"--kv-disk-dir " + dir + " --kv-disk-dtype int3", "--kv-disk-dtype"},
  };
  for (const Case& c : cases) {
    std::string err;
    EXPECT_NE(horizon_run(c.flags, &err), 0) << c.flags;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.flags << "\n" << err;
  }
  // A hot window turns the prefix store off, with a warning; the run goes on (the far tier works).
  std::string err;
  EXPECT_EQ(horizon_run("--kv-disk-dir " + dir + " --kv-hot-window 64 --kv-cache-dtype f16 --kv-cold-dtype int8", &err), 0)
      << err;
  EXPECT_NE(err.find("the prefix store is off"), std::string::npos) << err;
}

TEST(KvDiskFlags, BudgetPastTheFreeSpaceIsClampedWithAWarning) {
  const std::string dir = test::make_temp_dir("hz_kvflags");
  std::string err;
  EXPECT_EQ(horizon_run("--kv-disk-dir " + dir + " --kv-disk-budget 4000TiB", &err), 0) << err;
  EXPECT_NE(err.find("--kv-disk-budget 3.91 PiB is more than the"), std::string::npos) << err;
  EXPECT_NE(err.find("the disk tier plans with"), std::string::npos) << err;
}

TEST(KvDiskFlags, UnusableFolderTurnsTheTierOffAndTheRunSucceeds) {
  const std::string dir = test::make_temp_dir("hz_kvflags");
  ASSERT_EQ(0, test::run_command("touch " + dir + "/afile"));
  std::string err;
  EXPECT_EQ(horizon_run("--kv-disk-dir " + dir + "/afile/store", &err), 0) << err;
  EXPECT_NE(err.find("disk: off"), std::string::npos) << err;
}

}  // namespace
}  // namespace hz
