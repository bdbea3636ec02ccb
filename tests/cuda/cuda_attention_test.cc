// CUDA paged attention over a block-descriptor table, against a double-precision reference built
// from the scalar KV decoder, for every KV codec; and the exactness rule: a query's output is
// bit-identical whether it runs alone (decode), inside a prefill query block, or beside other
// sequences, with and without a sliding window (tests/support/paged_attention_checks.h). Skips
// without a GPU.
#include <gtest/gtest.h>

#include "support/gpu_test.h"
#include "support/paged_attention_checks.h"

namespace hz {
namespace {

class CudaAttentionTest : public ::testing::TestWithParam<test::AttentionParam> {};

TEST_P(CudaAttentionTest, MatchesReferenceAndIsBatchAndChunkInvariant) {
  HZ_REQUIRE_GPU();
  auto be = cuda::make_cuda_backend("GPU test");
  ASSERT_TRUE(be.ok()) << be.status().message();
  test::check_paged_attention(**be, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Codecs, CudaAttentionTest, ::testing::ValuesIn(test::attention_params()),
                         test::attention_param_name);

}  // namespace
}  // namespace hz
