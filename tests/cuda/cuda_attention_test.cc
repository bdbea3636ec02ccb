// CUDA paged attention over a block-descriptor table, against a double-precision reference built
// from the scalar KV decoder, for every KV codec; and the exactness rule: a query's output is
// bit-identical whether it runs alone (decode), inside a prefill query block, or beside other
// sequences, with and without a sliding window (tests/support/paged_attention_checks.h). Skips
// without a GPU.
#include <gtest/gtest.h>

#include "kernels/cuda/cuda_kernels.h"
#include "support/attention_override_backend.h"
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

// The first kernel (HORIZON_CUDA_ATTENTION=simple), through the same checks.
TEST_P(CudaAttentionTest, SimpleKernelMatchesReferenceAndIsInvariant) {
  HZ_REQUIRE_GPU();
  auto be = cuda::make_cuda_backend("GPU test");
  ASSERT_TRUE(be.ok()) << be.status().message();
  auto stream = device::Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  test::AttentionOverrideBackend simple(**be, [&](const cuda::PagedAttnArgs& a) {
    HZ_RETURN_IF_ERROR(cuda::paged_attention(a, cuda::AttentionKernel::kSimple, *stream));
    return stream->synchronize();
  });
  test::check_paged_attention(simple, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Codecs, CudaAttentionTest, ::testing::ValuesIn(test::attention_params()),
                         test::attention_param_name);

}  // namespace
}  // namespace hz
