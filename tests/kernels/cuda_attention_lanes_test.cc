// The chunked CUDA paged-attention kernel's phases (kernels/cuda/attention_lanes.h) run on the host
// (host::paged_attention_chunked): the checks of the first kernel (double-precision reference,
// exactness rule), and the same bits as the first kernel's host form (host_reference.h) for every
// codec, decode and prefill, with and without a sliding window — the two kernels compute the same
// values in different schedules. The GPU test (tests/cuda/cuda_attention_test.cc) runs the kernel
// itself.
#include "kernels/cuda/attention_lanes.h"
#include "kernels/cuda/host_reference.h"

#include <gtest/gtest.h>

#include "support/attention_override_backend.h"
#include "support/paged_attention_checks.h"

namespace hz {
namespace {

class CudaAttentionLanesTest : public ::testing::TestWithParam<test::AttentionParam> {};

std::unique_ptr<test::AttentionOverrideBackend> lanes_backend(cuda::Backend& host, int threads) {
  return std::make_unique<test::AttentionOverrideBackend>(host, [threads](const cuda::PagedAttnArgs& a) {
    cuda::host::paged_attention_chunked(a, threads);
    return Status();
  });
}

TEST_P(CudaAttentionLanesTest, MatchesReferenceAndIsBatchAndChunkInvariant) {
  auto host = cuda::make_host_backend();
  auto be = lanes_backend(*host, cuda::kAttnThreads);
  test::check_paged_attention(*be, GetParam());
}

TEST_P(CudaAttentionLanesTest, SameBitsAsTheFirstKernel) {
  const test::AttentionParam p = GetParam();
  auto host = cuda::make_host_backend();
  auto lanes = lanes_backend(*host, cuda::kAttnThreads);
  auto odd = lanes_backend(*host, 37);  // another thread count: another split of every phase
  test::PagedAttentionFixture f(p.codec, p.head_dim, {1, 700, 1600}, 7 + p.head_dim, p.heads, p.kv_heads, p.block_tokens);
  const int64_t qsize = static_cast<int64_t>(p.heads) * p.head_dim;
  std::vector<test::Query> dec = {{0, 0}, {1, 512}, {1, 699}, {2, 511}, {2, 1599}};
  std::vector<test::Query> pre;
  for (int64_t pos = 1490; pos < 1540; ++pos) pre.push_back({2, pos});  // across a segment boundary
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t window : {int64_t{0}, int64_t{700}, int64_t{33}}) {
    for (bool prefill : {false, true}) {
      SCOPED_TRACE(testing::Message() << "window " << window << (prefill ? " prefill" : " decode"));
      const std::vector<test::Query>& qs = prefill ? pre : dec;
      std::vector<float> q(qs.size() * qsize);
      for (auto& x : q) x = nd(rng);
      const auto want = f.run(*host, qs, q, window, prefill);
      const auto got = f.run(*lanes, qs, q, window, prefill);
      const auto got_odd = f.run(*odd, qs, q, window, prefill);
      ASSERT_EQ(want.size(), got.size());
      ASSERT_EQ(want.size(), got_odd.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(test::attn_float_bits(want[i]), test::attn_float_bits(got[i])) << "element " << i;
        ASSERT_EQ(test::attn_float_bits(want[i]), test::attn_float_bits(got_odd[i])) << "37 threads, element " << i;
      }
    }
  }
}

// The chunk of keys a CTA takes: tiles, up to a segment, rows x chunk within the shared scores.
TEST(CudaAttentionLanesChunkTest, ChunksAreWholeTilesWithinASegment) {
  EXPECT_EQ(cuda::attn::chunk_keys(1), 512);
  EXPECT_EQ(cuda::attn::chunk_keys(4), 512);
  EXPECT_EQ(cuda::attn::chunk_keys(16), 256);
  EXPECT_EQ(cuda::attn::chunk_keys(64), 64);
  EXPECT_EQ(cuda::attn::chunk_keys(200), 32);
  for (int64_t rows = 1; rows <= 128; ++rows) {
    const int64_t c = cuda::attn::chunk_keys(rows);
    EXPECT_EQ(c % cuda::kAttnTileTokens, 0) << rows;
    EXPECT_TRUE(rows * c <= 4096 || c == cuda::kAttnTileTokens) << rows;
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CudaAttentionLanesTest, ::testing::ValuesIn(test::attention_params()),
                         test::attention_param_name);

}  // namespace
}  // namespace hz
