// The GPU path (device model, device KV arena, DeviceSequence) on the host emulation of the CUDA
// backend: the same goldens and invariances the GPU must meet (tests/cuda/cuda_device_model_test.cc
// runs these checks on a GPU), plus what the device path refuses.
#include <gtest/gtest.h>

#include "kv/kv_layout.h"
#include "model/rope.h"
#include "runtime/single_sequence.h"
#include "base/thread_pool.h"

#include <cstdio>
#include <functional>
#include "support/device_model_checks.h"
#include "support/tiny_model.h"
#include "kernels/kernels.h"

namespace hz {
namespace {

using kernels::KvCodec;

class DeviceModelTest : public ::testing::Test {
 protected:
  std::unique_ptr<cuda::Backend> backend_ = cuda::make_host_backend();
};

TEST_F(DeviceModelTest, Stories260KGreedyF32KvMatchesGolden) {
  test::check_device_greedy(*backend_, "stories260K.gguf", "stories260K.json", 3e-3f, KvCodec::kF32);
}
TEST_F(DeviceModelTest, Stories260KGreedyF16KvMatchesGolden) {
  test::check_device_greedy(*backend_, "stories260K.gguf", "stories260K.json", 3e-3f, KvCodec::kF16);
}
TEST_F(DeviceModelTest, Stories260KGreedyBf16KvMatchesGolden) {
  test::check_device_greedy(*backend_, "stories260K.gguf", "stories260K.json", 3e-2f, KvCodec::kBF16);
}
// NeoX RoPE, q/k biases (zero) and reordered rows: the dense model's story.
TEST_F(DeviceModelTest, Stories260KQwen2GreedyMatchesDense) {
  test::check_device_greedy(*backend_, "stories260K-qwen2.gguf", "stories260K.json", 3e-3f, KvCodec::kF16);
}
TEST_F(DeviceModelTest, Stories260KQ8_0TeacherForced) {
  test::check_device_teacher_forced(*backend_, "stories260K-q8_0.gguf", "stories260K-q8_0.json", 0.05f);
}
TEST_F(DeviceModelTest, Stories260KQ4_0TeacherForced) {
  test::check_device_teacher_forced(*backend_, "stories260K-q4_0.gguf", "stories260K-q4_0.json", 0.05f);
}
TEST_F(DeviceModelTest, SynthTinyLastLogits) {
  test::check_device_last_logits(*backend_, "synth-tiny-f16.gguf", "synth-tiny-f16.json", 0.01f);
  test::check_device_last_logits(*backend_, "synth-tiny-q8_0.gguf", "synth-tiny-q8_0.json", 0.1f);
  test::check_device_last_logits(*backend_, "synth-tiny-q4_0.gguf", "synth-tiny-q4_0.json", 0.2f);
}

TEST_F(DeviceModelTest, Stories260KQuantizedKvIsAsCloseAsTheCpus) { test::check_device_kv_types_against_cpu(*backend_); }
TEST_F(DeviceModelTest, QuantizedKvLogitsDoNotDependOnBatchOrChunking) {
  for (KvCodec c : {KvCodec::kInt8, KvCodec::kFp8, KvCodec::kInt4}) {
    SCOPED_TRACE(kv_type_name(c));
    test::check_device_invariance(*backend_, "stories260K.gguf", c);
  }
}

TEST_F(DeviceModelTest, LogitsDoNotDependOnBatchOrChunking) { test::check_device_invariance(*backend_, "stories260K.gguf"); }
TEST_F(DeviceModelTest, QuantizedLogitsDoNotDependOnBatchOrChunking) {
  test::check_device_invariance(*backend_, "stories260K-q4_0.gguf");
}

TEST_F(DeviceModelTest, DecodeFramesGiveTheSameLogits) {
  test::check_decode_frames(*backend_, "stories260K.gguf");
  test::check_decode_frames(*backend_, "stories260K-q4_0.gguf", KvCodec::kInt8);
}
TEST_F(DeviceModelTest, ANewArenaGetsItsOwnGraphs) { test::check_new_arena_graphs(*backend_); }

// The deep-context attention check (DeviceSequence::check_synthetic_attention): device attention
// over synthetic rows agrees with the host's double-precision reference made from the same seeds
// (filled in one call or in two that split a block), and a block whose bytes are damaged fails it.
TEST_F(DeviceModelTest, SyntheticAttentionCheckAgreesAndCatchesADamagedBlock) {
  test::DeviceFixture f = test::load_on_device("stories260K.gguf", *backend_);
  ASSERT_NE(f.device, nullptr);
  const int32_t last = f.device->config().num_layers - 1;
  for (KvCodec c : {KvCodec::kF16, KvCodec::kInt8, KvCodec::kFp8}) {
    SCOPED_TRACE(kv_type_name(c));
    auto seq = test::device_sequence(*f.device, *backend_, {.max_tokens = 2100, .kv_codec = c});
    ASSERT_NE(seq, nullptr);
    ASSERT_TRUE(seq->fill_synthetic(1001, 5).ok());
    ASSERT_TRUE(seq->fill_synthetic(999, 5).ok());  // continues a part-filled block
    auto r = seq->check_synthetic_attention(last);
    ASSERT_TRUE(r.ok()) << r.status().message();
    std::printf("%s: depth %lld layer %d, max |device - reference| %.3g of max |reference| %.3g\n", kv_type_name(c),
                static_cast<long long>(r->depth), r->layer, r->max_abs_diff, r->max_abs_ref);
    EXPECT_EQ(r->depth, 2000);
    EXPECT_GT(r->max_abs_ref, 1e-3);
    EXPECT_TRUE(r->ok());
    // Damage the keys of block 70 (positions 1120-1135) in the checked layer: the check fails.
    DeviceKvArena& kv = seq->arena();
    const device::DeviceKvBlock d = kv.descriptor(70);  // DeviceSequence takes blocks 0, 1, ... in order
    const uint64_t lo = static_cast<uint64_t>(kv.geometry().layer_offset(last));
    std::vector<uint8_t> plane(static_cast<size_t>(kv.geometry().plane_elem_bytes()), 0x3c);
    ASSERT_TRUE(backend_->upload(kv.data() + d.k_elems + lo, plane.data(), plane.size()).ok());
    ASSERT_TRUE(backend_->synchronize().ok());
    auto bad = seq->check_synthetic_attention(last);
    ASSERT_TRUE(bad.ok());
    EXPECT_FALSE(bad->ok()) << bad->max_abs_diff;
  }
  // Rows the model wrote cannot be made again: the check says so.
  auto seq = test::device_sequence(*f.device, *backend_, {.max_tokens = 64});
  ASSERT_NE(seq, nullptr);
  test::append(*seq, {1, 2, 3});
  EXPECT_FALSE(seq->check_synthetic_attention(0).ok());
}

TEST_F(DeviceModelTest, PerplexityOnTheDeviceIsTheCpus) { test::check_device_perplexity(*backend_); }

// K-quant tensors (the GPU kernels read none) are converted to q8_0 at load, each named, and the
// model still meets a looser golden tolerance (the conversion re-quantizes).
TEST_F(DeviceModelTest, KQuantTensorsAreConvertedAndNamed) {
  test::DeviceFixture f = test::load_on_device("synth-small-q4_k_m.gguf", *backend_);
  ASSERT_NE(f.device, nullptr);
  ASSERT_FALSE(f.device->conversions().empty());
  for (const std::string& c : f.device->conversions()) {
    EXPECT_NE(c.find(".weight: q"), std::string::npos) << c;
    EXPECT_NE(c.find("-> q8_0"), std::string::npos) << c;
  }
  EXPECT_EQ(f.device->weight_bytes(), DeviceModel::weight_bytes_for(*f.model));
  test::check_device_last_logits(*backend_, "synth-small-q4_k_m.gguf", "synth-small-q4_k_m.json", 0.3f);
}

// A file that mixes quantized and f32 matrices (q/output/down f32; k, v, gate, up q8_0): each
// quantized matmul reads its own input's blocks. The device keeps one quantized copy of the last
// input for the matmuls that share it (k after q, v after k, up after gate); with an f32 matrix
// between them it must not reuse a copy of an input that a kernel has since rewritten (layer 1's
// k would otherwise read layer 0's FFN input, and the logits would be far from the CPU's).
TEST_F(DeviceModelTest, MixedTypesQuantizeEachInputAfresh) {
  const test::TinyModelSpec spec{
      .layers = 3, .hidden = 64, .heads = 4, .kv_heads = 2, .head_dim = 16, .ffn = 96, .vocab = 64};
  const test::TinyModel tm = test::TinyModel::random(spec);
  test::TinyModel f32_part = tm;
  std::vector<std::string> quantized;
  for (int32_t l = 0; l < spec.layers; ++l) {
    for (const char* t : {"attn_k", "attn_v", "ffn_gate", "ffn_up"}) {
      quantized.push_back(fmt::format("blk.{}.{}.weight", l, t));
      f32_part.w.erase(quantized.back());
    }
  }
  const std::string dir = test::make_temp_dir("mixed");
  const std::string path = dir + "/mixed.gguf";
  ASSERT_TRUE(f32_part.write(path, [&](GgufWriter& g) {
    for (const std::string& name : quantized) {
      const std::vector<uint64_t>& dims = tm.dims.at(name);
      const std::vector<float>& v = tm.w.at(name);
      g.add_tensor(name, DType::kQ8_0, dims, [&v, cols = static_cast<int64_t>(dims[0])](uint8_t* dst, uint64_t) {
        const int64_t rows = static_cast<int64_t>(v.size()) / cols;
        for (int64_t r = 0; r < rows; ++r) kernels::encode_row(DType::kQ8_0, v.data() + r * cols, dst + r * row_bytes(DType::kQ8_0, cols), cols);
      });
    }
  }));
  auto model = Model::load(path, {}, /*pack=*/false);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto dev = DeviceModel::create(**model, *backend_);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ThreadPool pool(1);
  SingleSequence cpu(**model, pool, SingleSequenceOptions{.max_tokens = 64, .kv_dtype = DType::kF32});
  auto seq = test::device_sequence(**dev, *backend_, {.max_tokens = 64, .kv_codec = KvCodec::kF32});
  ASSERT_NE(seq, nullptr);
  const std::vector<int32_t> tokens = test::random_tokens(12, spec.vocab, 7);
  const std::vector<float> want = cpu.append(tokens, /*all_logits=*/true);
  const std::vector<float> got = test::append(*seq, tokens, /*all_logits=*/true);
  ASSERT_EQ(got.size(), want.size());
  float worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  EXPECT_LT(worst, 1e-3f * std::max(scale, 1.0f)) << "largest logit " << scale;
  std::system(("rm -rf " + dir).c_str());
}

// What the planner reserves for scratch (scratch_bytes_for) bounds what the steps allocate: a
// prompt prefilled in chunks of 80 tokens (not a power of two) to a depth of 1100 positions (three
// attention segments), every chunk's logits, then decode steps.
TEST_F(DeviceModelTest, ScratchStaysWithinThePlannersCount) {
  test::DeviceFixture f = test::load_on_device("stories260K.gguf", *backend_);
  ASSERT_NE(f.device, nullptr);
  auto seq = test::device_sequence(*f.device, *backend_, {.max_tokens = 1200, .prefill_chunk = 80});
  ASSERT_NE(seq, nullptr);
  const std::vector<int32_t> tokens = test::random_tokens(1100, f.device->config().vocab, 3);
  test::append(*seq, tokens, /*all_logits=*/true);
  for (int i = 0; i < 4; ++i) test::append(*seq, {tokens[i]});
  const uint64_t planned = DeviceModel::scratch_bytes_for(f.device->config(), 80, 1200);
  EXPECT_GT(f.device->scratch_bytes(), planned / 2);
  EXPECT_LE(f.device->scratch_bytes(), planned);
}

// The device copy of an unconverted model is the file's tensors: its size is what the planner counts.
TEST_F(DeviceModelTest, WeightBytesAreTheFilesTensors) {
  test::DeviceFixture f = test::load_on_device("stories260K-q4_0.gguf", *backend_);
  ASSERT_NE(f.device, nullptr);
  EXPECT_EQ(f.device->weight_bytes(), DeviceModel::weight_bytes_for(*f.model));
  EXPECT_TRUE(f.device->conversions().empty() ||
              f.device->conversions().size() == 1);  // a q6_k/f32 output head may be converted
  EXPECT_GT(DeviceModel::scratch_bytes_for(f.model->config(), 512, 4096), 0u);
}

TEST_F(DeviceModelTest, RefusesWhatTheGpuPathDoesNotRun) {
  auto moe = Model::load(test::model_path("stories260K-moe4.gguf"), {}, false);
  ASSERT_TRUE(moe.ok());
  auto d = DeviceModel::create(**moe, *backend_);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(d.status().message().find("mixture-of-experts"), std::string::npos) << d.status().message();

  auto tiny = Model::load(test::model_path("llama-2-tiny-random.gguf"), {}, false);  // head dim 4
  ASSERT_TRUE(tiny.ok());
  auto t = DeviceModel::create(**tiny, *backend_);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("head_dim 4"), std::string::npos) << t.status().message();
}

// A sequence past its arena's capacity is an error, not a crash; truncation frees blocks for reuse.
TEST_F(DeviceModelTest, SequenceCapacityIsAnErrorAndTruncateFreesBlocks) {
  test::DeviceFixture f = test::load_on_device("stories260K.gguf", *backend_);
  ASSERT_NE(f.device, nullptr);
  auto seq = test::device_sequence(*f.device, *backend_, {.max_tokens = 32});
  ASSERT_NE(seq, nullptr);
  const auto tokens = test::random_tokens(20, f.device->config().vocab, 3);
  const std::vector<float> first = test::append(*seq, tokens);
  auto over = seq->append(tokens);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kOutOfRange);
  seq->truncate(0);
  EXPECT_EQ(seq->arena().pool().num_free(), 2);
  EXPECT_TRUE(test::same_bits(first, test::append(*seq, tokens)));  // rows rewritten in place
}

}  // namespace
}  // namespace hz

namespace hz {
namespace {

// The host backend's RoPE (per-pair frequencies, as the CUDA kernel takes them) rotates exactly as
// hz::Rope::apply, for both layouts and a scaled config, at far positions.
TEST(DeviceRopeTest, HostRopeIsRopeApply) {
  auto be = cuda::make_host_backend();
  for (RopeLayout layout : {RopeLayout::kNormal, RopeLayout::kNeox}) {
    RopeConfig cfg;
    cfg.layout = layout;
    cfg.dim = 48;
    cfg.freq_base = 500000.0f;
    cfg.scaling = RopeScaling::kYarn;
    cfg.freq_scale = 0.25f;
    cfg.ext_factor = 1.0f;
    cfg.orig_ctx = 4096;
    const int32_t hd = 64, heads = 3;
    const Rope rope(cfg, hd);
    std::vector<float> theta(cfg.dim / 2);
    for (int32_t i = 0; i < cfg.dim / 2; ++i) theta[i] = rope.angle(1, i);
    const std::vector<int64_t> pos = {0, 1, 511, 70000, 1048575};
    std::vector<float> x(pos.size() * heads * hd);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : x) v = nd(rng);
    std::vector<float> want = x;
    for (size_t t = 0; t < pos.size(); ++t) rope.apply(want.data() + t * heads * hd, heads, pos[t]);
    ASSERT_TRUE(be->rope(x.data(), static_cast<int64_t>(pos.size()), heads, hd, pos.data(), theta.data(), cfg.dim,
                         rope.mscale(), layout == RopeLayout::kNeox)
                    .ok());
    EXPECT_TRUE(test::same_bits(x, want));
  }
}

}  // namespace
}  // namespace hz
