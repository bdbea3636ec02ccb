// Host-side launch logic of the CUDA kernels (no GPU needed): argument checks name the argument,
// launch grids stay within CUDA's limits, attention query blocks and shared memory fit an H200's
// 227 KiB for every supported shape, graph buckets.
#include <gtest/gtest.h>

#include "kernels/cuda/launch_checks.h"

namespace hz::cuda {
namespace {

TEST(CudaLaunchChecksTest, MatmulArguments) {
  EXPECT_TRUE(check_matmul_args(DType::kQ4_0, 4096, 4096, 1).ok());
  EXPECT_TRUE(check_matmul_args(DType::kBF16, 128256, 4096, 512).ok());
  EXPECT_TRUE(check_matmul_args(DType::kF32, 5, 37, 3).ok());
  Status st = check_matmul_args(DType::kQ8_0, 16, 40, 1);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("n = 40"), std::string::npos) << st.message();
  EXPECT_EQ(check_matmul_args(DType::kQ4_K, 16, 256, 1).code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(check_matmul_args(DType::kF16, 0, 64, 1).ok());
  EXPECT_FALSE(check_matmul_args(DType::kF16, 8, 64, 0).ok());
  EXPECT_FALSE(check_matmul_args(DType::kF16, 8, 64, int64_t{65536} * kMatmulTokenTile).ok());
  const Dim3 g = matmul_grid(4096, 17);
  EXPECT_EQ(g.x, 4096u);
  EXPECT_EQ(g.y, 3u);  // ceil(17 / 8)
  EXPECT_EQ(g.z, 1u);
}

TEST(CudaLaunchChecksTest, RowAndElementArguments) {
  EXPECT_TRUE(check_rows_args("k", 3, 96, 32).ok());
  EXPECT_NE(check_rows_args("CUDA thing", 3, 95, 32).message().find("CUDA thing: n = 95"), std::string::npos);
  EXPECT_FALSE(check_rows_args("k", int64_t{1} << 40, int64_t{1} << 40).ok());  // overflow guarded
  EXPECT_TRUE(check_rope_args(7, 32, 128, 64).ok());
  EXPECT_FALSE(check_rope_args(7, 32, 128, 130).ok());
  EXPECT_FALSE(check_rope_args(7, 32, 128, 63).ok());
  EXPECT_TRUE(check_embedding_args(DType::kQ4_0, 32000, 4096, 1).ok());
  EXPECT_FALSE(check_embedding_args(DType::kQ6_K, 32000, 4096, 1).ok());
  EXPECT_TRUE(check_kv_codec_args(kernels::KvCodec::kFp8, 16, 128).ok());
  EXPECT_FALSE(check_kv_codec_args(kernels::KvCodec::kInt8, 0, 128).ok());
}

TEST(CudaLaunchChecksTest, AttentionShapesFitSharedMemory) {
  constexpr int64_t kH200SmemOptin = 227 * 1024;
  for (int32_t hd = 8; hd <= 256; hd += 2) {
    for (int32_t group : {1, 2, 4, 5, 8, 16, 32, 64}) {
      for (bool prefill : {false, true}) {
        const int32_t qb = attention_query_block(group, prefill);
        ASSERT_GE(qb, 1);
        ASSERT_LE(qb, kAttnMaxQueryBlock);
        ASSERT_LE(qb * group, kAttnMaxRows) << "group " << group;
        ASSERT_LE(attention_smem_bytes(qb * group, hd), kH200SmemOptin) << "hd " << hd << " group " << group;
        EXPECT_TRUE(check_paged_attention_args(1, qb, 1, 1, group).ok());
      }
    }
  }
  EXPECT_EQ(attention_query_block(4, false), 1);
  EXPECT_EQ(attention_query_block(4, true), 16);
  EXPECT_EQ(attention_query_block(8, true), 8);
  EXPECT_TRUE(check_attention_shape(32, 8, 128, 16).ok());
  EXPECT_FALSE(check_attention_shape(32, 6, 128, 16).ok());
  EXPECT_EQ(check_attention_shape(32, 8, 512, 16).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(check_attention_shape(32, 8, 7, 16).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(check_attention_shape(128, 1, 64, 16).code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(check_paged_attention_args(1, 16, 1, 1, 8).ok());   // 128 rows
  EXPECT_FALSE(check_paged_attention_args(1, 1, 70000, 1, 4).ok());  // too many segments for grid z
  EXPECT_FALSE(check_paged_attention_args(3, 1, 1, 2, 4).ok());     // more blocks than queries
  // A million-token decode of the llama-8b shape: 2048 segments; its partial scratch.
  EXPECT_TRUE(check_paged_attention_args(1, 1, 2048, 1, 4).ok());
  EXPECT_EQ(attention_partial_floats(1, 32, 2048, 128), int64_t{32} * 2048 * 130);
}

TEST(CudaLaunchChecksTest, GraphBucketsAreTheSmallestThatFit) {
  EXPECT_EQ(graph_bucket(1), 1);
  EXPECT_EQ(graph_bucket(2), 2);
  EXPECT_EQ(graph_bucket(3), 4);
  EXPECT_EQ(graph_bucket(17), 32);
  EXPECT_EQ(graph_bucket(256), 256);
  EXPECT_FALSE(graph_bucket(257).has_value());
  EXPECT_FALSE(graph_bucket(0).has_value());
  for (size_t i = 1; i < graph_buckets().size(); ++i) EXPECT_LT(graph_buckets()[i - 1], graph_buckets()[i]);
}

TEST(CudaLaunchChecksTest, SupportedTypes) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) EXPECT_TRUE(weight_type_supported(t));
  EXPECT_FALSE(weight_type_supported(DType::kQ6_K));
}

}  // namespace
}  // namespace hz::cuda
