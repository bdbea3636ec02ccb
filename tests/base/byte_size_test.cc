#include "base/byte_size.h"

#include <gtest/gtest.h>

namespace hz {
namespace {

TEST(ByteSizeTest, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(*parse_byte_size("4096", "x"), 4096u);
  EXPECT_EQ(*parse_byte_size("100B", "x"), 100u);
  EXPECT_EQ(*parse_byte_size("4GiB", "x"), 4ull << 30);
  EXPECT_EQ(*parse_byte_size("4G", "x"), 4ull << 30);
  EXPECT_EQ(*parse_byte_size("4gib", "x"), 4ull << 30);
  EXPECT_EQ(*parse_byte_size("512MiB", "x"), 512ull << 20);
  EXPECT_EQ(*parse_byte_size("1.5K", "x"), 1536u);
  EXPECT_EQ(*parse_byte_size("2TiB", "x"), 2ull << 40);
  EXPECT_EQ(*parse_byte_size("4GB", "x"), 4000000000ull);
  EXPECT_EQ(*parse_byte_size("3 MB", "x"), 3000000ull);
  EXPECT_EQ(*parse_byte_size(" 24GiB ", "x"), 24ull << 30);
}

TEST(ByteSizeTest, PercentOfBase) {
  EXPECT_EQ(*parse_byte_size("50%", "--memory", 1000), 500u);
  EXPECT_EQ(*parse_byte_size("12.5%", "--memory", 1 << 20), 131072u);
  auto no_base = parse_byte_size("50%", "--memory");
  ASSERT_FALSE(no_base.ok());
  EXPECT_NE(no_base.status().message().find("percentage"), std::string::npos);
  EXPECT_FALSE(parse_byte_size("150%", "--memory", 1000).ok());
}

TEST(ByteSizeTest, RefusesGarbageNamingTheFlag) {
  for (const char* bad : {"", "GiB", "abc", "4XB", "1.2.3G", "-4G", "4 GiBs", "1e30", "99999999999999999999T"}) {
    auto r = parse_byte_size(bad, "--memory");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--memory"), std::string::npos) << r.status().message();
  }
}

TEST(ByteSizeTest, Formats) {
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(24ull << 30), "24.00 GiB");
}

}  // namespace
}  // namespace hz
