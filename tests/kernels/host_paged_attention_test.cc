// The host form of the CUDA paged attention (kernels/cuda/host_reference.h, what the host emulation
// of the CUDA backend runs) against the double-precision reference for every KV codec, and the
// exactness rule the GPU kernel meets: the same checks as tests/cuda/cuda_attention_test.cc.
#include <gtest/gtest.h>

#include "support/paged_attention_checks.h"

namespace hz {
namespace {

class HostPagedAttentionTest : public ::testing::TestWithParam<test::AttentionParam> {};

TEST_P(HostPagedAttentionTest, MatchesReferenceAndIsBatchAndChunkInvariant) {
  auto be = cuda::make_host_backend();
  test::check_paged_attention(*be, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Codecs, HostPagedAttentionTest, ::testing::ValuesIn(test::attention_params()),
                         test::attention_param_name);

}  // namespace
}  // namespace hz
