// CUDA paged attention over a block-descriptor table, against a double-precision reference built
// from the scalar KV decoder, for every KV codec; and the exactness rule: a query's output is
// bit-identical whether it runs alone (decode), inside a prefill query block, or beside other
// sequences, with and without a sliding window (tests/support/paged_attention_checks.h). Skips
// without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

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

// The two kernels compute the same operations in the same order: on the GPU, the same bits.
TEST_P(CudaAttentionTest, ChunkedAndSimpleKernelsGiveTheSameBits) {
  HZ_REQUIRE_GPU();
  auto be = cuda::make_cuda_backend("GPU test");
  ASSERT_TRUE(be.ok()) << be.status().message();
  auto stream = device::Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  auto with = [&](cuda::AttentionKernel k) {
    return std::make_unique<test::AttentionOverrideBackend>(**be, [&, k](const cuda::PagedAttnArgs& a) {
      HZ_RETURN_IF_ERROR(cuda::paged_attention(a, k, *stream));
      return stream->synchronize();
    });
  };
  auto chunked = with(cuda::AttentionKernel::kChunked);
  auto simple = with(cuda::AttentionKernel::kSimple);
  const test::AttentionParam p = GetParam();
  test::PagedAttentionFixture f(p.codec, p.head_dim, {1, 700, 1600}, 5 + p.head_dim, p.heads, p.kv_heads, p.block_tokens);
  const int64_t qsize = static_cast<int64_t>(p.heads) * p.head_dim;
  std::vector<test::Query> dec = {{0, 0}, {1, 512}, {1, 699}, {2, 511}, {2, 1599}};
  std::vector<test::Query> pre;
  for (int64_t pos = 1490; pos < 1540; ++pos) pre.push_back({2, pos});
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t window : {int64_t{0}, int64_t{33}}) {
    for (bool prefill : {false, true}) {
      SCOPED_TRACE(testing::Message() << "window " << window << (prefill ? " prefill" : " decode"));
      const std::vector<test::Query>& qs = prefill ? pre : dec;
      std::vector<float> q(qs.size() * qsize);
      for (auto& x : q) x = nd(rng);
      const auto a = f.run(*chunked, qs, q, window, prefill);
      const auto b = f.run(*simple, qs, q, window, prefill);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(test::attn_float_bits(a[i]), test::attn_float_bits(b[i])) << "element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CudaAttentionTest, ::testing::ValuesIn(test::attention_params()),
                         test::attention_param_name);

}  // namespace
}  // namespace hz
