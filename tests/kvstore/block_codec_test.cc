// BlockCodec edge cases found by fuzzing: an empty stored payload (null pointers) decodes to
// nothing; a size mismatch is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kvstore/block_codec.h"

namespace hz::kvstore {
namespace {

TEST(BlockCodecTest, EmptyStoredPayloadWithNullPointersDecodes) {
  EXPECT_TRUE(decompress(Codec::kNone, nullptr, 0, nullptr, 0).ok());
}

TEST(BlockCodecTest, StoredPayloadOfTheWrongSizeIsRefused) {
  std::vector<uint8_t> src(8, 1), dst(4);
  Status s = decompress(Codec::kNone, src.data(), src.size(), dst.data(), dst.size());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expected 4"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hz::kvstore
