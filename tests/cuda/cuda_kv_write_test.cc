// The CUDA paged KV write against the scalar encoder, byte for byte, arena bytes around the rows
// untouched (tests/support/kv_write_checks.h). Skips without a GPU.
#include <gtest/gtest.h>

#include "support/gpu_test.h"
#include "support/kv_write_checks.h"

namespace hz {
namespace {

TEST(CudaKvWriteTest, RowsLandEncodedWhereTheTablesSay) {
  HZ_REQUIRE_GPU();
  auto be = cuda::make_cuda_backend("GPU test");
  ASSERT_TRUE(be.ok()) << be.status().message();
  for (auto codec : {kernels::KvCodec::kF32, kernels::KvCodec::kF16, kernels::KvCodec::kBF16, kernels::KvCodec::kFp8,
                     kernels::KvCodec::kInt8, kernels::KvCodec::kInt4}) {
    for (int32_t hd : {8, 64, 20, 256}) {
      SCOPED_TRACE(testing::Message() << "codec " << static_cast<int>(codec) << " head dim " << hd);
      test::check_kv_write(**be, codec, hd);
    }
  }
}

}  // namespace
}  // namespace hz
