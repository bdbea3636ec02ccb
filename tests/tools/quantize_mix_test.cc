// `horizon quantize --type q4_k_m|q5_k_m|...`: llama.cpp's per-tensor mixes (the same type for
// every tensor as llama-quantize wrote into the shared synth-small files), the Q8_0 fallback for
// rows that cannot take a k-quant (with a warning naming the tensor), and the written summary.
#include <gtest/gtest.h>

#include <filesystem>

#include "format/gguf.h"
#include "model/quantizer.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::string bin() { return HORIZON_BINARY; }

TEST(QuantizeMixTest, TensorTypesMatchLlamaQuantize) {
  std::string dir = test::make_temp_dir("qmix");
  for (const char* mix : {"q4_k_m", "q5_k_m"}) {
    const std::string out_path = dir + "/" + mix + ".gguf";
    std::string out, err;
    // From the Q6_K file (dequantized, then re-encoded): the types depend only on names and shapes.
    ASSERT_EQ(test::run_command(bin() + " quantize " + test::model_path("synth-small-q6_k.gguf") + " " + out_path + " --type " + mix,
                                &out, &err),
              0)
        << err;
    EXPECT_NE(err.find("q6_K     5 tensors"), std::string::npos) << err;  // the summary lists what was written
    auto ours = GgufFile::open(out_path);
    auto theirs = GgufFile::open(test::model_path(std::string("synth-small-") + mix + ".gguf"));
    ASSERT_TRUE(ours.ok() && theirs.ok());
    ASSERT_EQ(ours->tensors().size(), theirs->tensors().size());
    for (const auto& t : theirs->tensors()) {
      const TensorInfo* o = ours->get_tensor(t.name);
      ASSERT_NE(o, nullptr) << t.name;
      EXPECT_EQ(dtype_name(o->dtype), dtype_name(t.dtype)) << mix << " " << t.name;
      EXPECT_EQ(o->num_bytes, t.num_bytes) << t.name;
    }
    auto ft = ours->get_int_or("general.file_type", 0);
    auto want = theirs->get_int_or("general.file_type", -1);
    ASSERT_TRUE(ft.ok() && want.ok());
    EXPECT_EQ(*ft, *want) << mix;
  }
  std::filesystem::remove_all(dir);
}

TEST(QuantizeMixTest, LayersGettingMoreBitsFollowLlamaCpp) {
  // 32 layers: the first and last four, and every third between (llama.cpp's use_more_bits).
  MixPosition p;
  p.num_layers = 32;
  std::vector<int> raised;
  for (int i = 0; i < 32; ++i) {
    p.layer_idx = i;
    p.name = "blk." + std::to_string(i) + ".ffn_down.weight";
    if (mix_tensor_type(QuantMix::kQ4_K_M, DType::kQ4_K, p) == DType::kQ6_K) raised.push_back(i);
    p.name = "blk." + std::to_string(i) + ".attn_q.weight";
    EXPECT_EQ(mix_tensor_type(QuantMix::kQ4_K_M, DType::kQ4_K, p), DType::kQ4_K);
  }
  EXPECT_EQ(raised, (std::vector<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  p.name = "output.weight";
  EXPECT_EQ(mix_tensor_type(QuantMix::kQ5_K_S, DType::kQ5_K, p), DType::kQ6_K);
  p.name = "token_embd.weight";
  EXPECT_EQ(mix_tensor_type(QuantMix::kQ4_K_M, DType::kQ4_K, p), DType::kQ4_K);
  p.has_output = false;  // tied head: the embedding is the head
  EXPECT_EQ(mix_tensor_type(QuantMix::kQ4_K_M, DType::kQ4_K, p), DType::kQ6_K);
  p.name = "blk.2.attn_v.weight";
  p.layer_idx = 2;
  EXPECT_EQ(mix_tensor_type(QuantMix::kQ4_K_S, DType::kQ4_K, p), DType::kQ5_K);
  p.num_experts = 8;
  EXPECT_EQ(mix_tensor_type(QuantMix::kQ4_K_M, DType::kQ4_K, p), DType::kQ8_0);
}

TEST(QuantizeMixTest, RowsThatCannotTakeAKQuantFallBackToQ8_0WithAWarning) {
  // stories260K: rows of 64 and 172 values; 64 takes Q8_0, 172 (not a multiple of 32) the F16 fallback.
  std::string dir = test::make_temp_dir("qfallback");
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + " quantize " + test::model_path("stories260K.gguf") + " " + dir + "/m.gguf --type q4_k", &out, &err),
            0)
      << err;
  EXPECT_NE(err.find("warning: blk.0.attn_q.weight: rows of 64 values are not a multiple of 256 (q4_K): written as q8_0"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("warning: blk.0.ffn_down.weight: rows of 172 values"), std::string::npos) << err;
  EXPECT_NE(err.find("q8_0"), std::string::npos) << err;
  // Unsupported llama-quantize types are named as such.
  EXPECT_NE(test::run_command(bin() + " quantize " + test::model_path("stories260K.gguf") + " " + dir + "/x.gguf --type q3_k_m", &out, &err),
            0);
  EXPECT_NE(err.find("'q3_k_m' is not written by horizon"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hz
