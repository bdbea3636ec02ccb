// The host form of the paged KV write (what the host emulation of the CUDA backend runs) against
// the scalar encoder, byte for byte, arena bytes around the rows untouched (tests/support/kv_write_checks.h).
#include <gtest/gtest.h>

#include "support/kv_write_checks.h"

namespace hz {
namespace {

TEST(HostKvWriteTest, RowsLandEncodedWhereTheTablesSay) {
  auto be = cuda::make_host_backend();
  for (auto codec : {kernels::KvCodec::kF32, kernels::KvCodec::kF16, kernels::KvCodec::kBF16, kernels::KvCodec::kFp8,
                     kernels::KvCodec::kInt8, kernels::KvCodec::kInt4}) {
    for (int32_t hd : {8, 64, 20}) {
      SCOPED_TRACE(testing::Message() << "codec " << static_cast<int>(codec) << " head dim " << hd);
      test::check_kv_write(*be, codec, hd);
    }
  }
}

}  // namespace
}  // namespace hz
