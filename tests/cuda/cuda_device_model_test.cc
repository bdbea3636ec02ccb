// The GPU path on the GPU: the device model's goldens and invariances (tests/support/
// device_model_checks.h, also run on the host emulation in tests/model/device_model_test.cc), and
// the GPU's logits against the host emulation's. Skips where no GPU answers.
#include <gtest/gtest.h>

#include "support/device_model_checks.h"
#include "support/gpu_test.h"

namespace hz {
namespace {

using kernels::KvCodec;

class CudaDeviceModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HZ_REQUIRE_GPU();
    auto b = cuda::make_cuda_backend("GPU test");
    ASSERT_TRUE(b.ok()) << b.status().message();
    backend_ = std::move(b).value();
  }
  std::unique_ptr<cuda::Backend> backend_;
};

TEST_F(CudaDeviceModelTest, Stories260KGreedyF32KvMatchesGolden) {
  test::check_device_greedy(*backend_, "stories260K.gguf", "stories260K.json", 3e-3f, KvCodec::kF32);
}
TEST_F(CudaDeviceModelTest, Stories260KGreedyF16KvMatchesGolden) {
  test::check_device_greedy(*backend_, "stories260K.gguf", "stories260K.json", 3e-3f, KvCodec::kF16);
}
TEST_F(CudaDeviceModelTest, Stories260KQwen2GreedyMatchesDense) {
  test::check_device_greedy(*backend_, "stories260K-qwen2.gguf", "stories260K.json", 3e-3f, KvCodec::kF16);
}
TEST_F(CudaDeviceModelTest, Stories260KQ8_0TeacherForced) {
  test::check_device_teacher_forced(*backend_, "stories260K-q8_0.gguf", "stories260K-q8_0.json", 0.05f);
}
TEST_F(CudaDeviceModelTest, Stories260KQ4_0TeacherForced) {
  test::check_device_teacher_forced(*backend_, "stories260K-q4_0.gguf", "stories260K-q4_0.json", 0.05f);
}
TEST_F(CudaDeviceModelTest, SynthTinyLastLogits) {
  test::check_device_last_logits(*backend_, "synth-tiny-f16.gguf", "synth-tiny-f16.json", 0.01f);
  test::check_device_last_logits(*backend_, "synth-tiny-q8_0.gguf", "synth-tiny-q8_0.json", 0.1f);
  test::check_device_last_logits(*backend_, "synth-tiny-q4_0.gguf", "synth-tiny-q4_0.json", 0.2f);
}
// int8, fp8 and int4 KV: within 1.5x the CPU's error of the golden for the same type, plus 0.01
// (int4: in use), as on the host emulation (tests/model/device_model_test.cc has the figures).
TEST_F(CudaDeviceModelTest, Stories260KQuantizedKvIsAsCloseAsTheCpus) { test::check_device_kv_types_against_cpu(*backend_); }
TEST_F(CudaDeviceModelTest, QuantizedKvLogitsDoNotDependOnBatchOrChunking) {
  for (KvCodec c : {KvCodec::kInt8, KvCodec::kFp8, KvCodec::kInt4}) {
    SCOPED_TRACE(kv_type_name(c));
    test::check_device_invariance(*backend_, "stories260K.gguf", c);
  }
}
// Decode steps replayed from captured CUDA graphs give the logits of the same steps launched one by one.
TEST_F(CudaDeviceModelTest, DecodeGraphsGiveTheSameLogits) {
  test::check_decode_frames(*backend_, "stories260K.gguf");
  test::check_decode_frames(*backend_, "stories260K-q4_0.gguf", KvCodec::kInt8);
}
TEST_F(CudaDeviceModelTest, ANewArenaGetsItsOwnGraphs) { test::check_new_arena_graphs(*backend_); }
TEST_F(CudaDeviceModelTest, PerplexityIsTheCpus) { test::check_device_perplexity(*backend_); }
TEST_F(CudaDeviceModelTest, LogitsDoNotDependOnBatchOrChunking) { test::check_device_invariance(*backend_, "stories260K.gguf"); }
TEST_F(CudaDeviceModelTest, QuantizedLogitsDoNotDependOnBatchOrChunking) {
  test::check_device_invariance(*backend_, "stories260K-q4_0.gguf");
}

// The GPU computes what the host emulation computes, up to the float reductions' order (matmul
// tree, expf): every logit of a 300-token prompt within 1e-3.
TEST_F(CudaDeviceModelTest, LogitsMatchTheHostEmulation) {
  auto host = cuda::make_host_backend();
  for (const char* file : {"stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf"}) {
    SCOPED_TRACE(file);
    test::DeviceFixture g = test::load_on_device(file, *backend_);
    test::DeviceFixture h = test::load_on_device(file, *host);
    ASSERT_NE(g.device, nullptr);
    ASSERT_NE(h.device, nullptr);
    const auto tokens = test::random_tokens(300, g.device->config().vocab, 21);
    auto gs = test::device_sequence(*g.device, *backend_, {.max_tokens = 320});
    auto hs = test::device_sequence(*h.device, *host, {.max_tokens = 320});
    const std::vector<float> a = test::append(*gs, tokens, true), b = test::append(*hs, tokens, true);
    ASSERT_EQ(a.size(), b.size());
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LE(worst, 1e-3f);
    RecordProperty(std::string("max_abs_diff_") + file, std::to_string(worst));
  }
}

}  // namespace
}  // namespace hz
