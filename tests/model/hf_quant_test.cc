// Pre-quantized Hugging Face checkpoints: the dequantizers against literal packed words (the layouts
// as the GPTQ and AWQ packers write them) and against packers written here; quantization_config
// parsing and its refusals; and stories260K folders whose attention (and, for FP8, every) matrix
// was quantized here, which load to exactly the dequantized values (F32) or their Q8_0 encoding,
// generate close to the golden, and whose broken variants are refused with errors naming the tensor.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "base/thread_pool.h"
#include "format/safetensors.h"
#include "kernels/kernels.h"
#include "kernels/kv_codec.h"
#include "model/hf_folder.h"
#include "model/hf_quant.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/golden.h"
#include "support/hf_folder_writer.h"
#include "support/test_support.h"

namespace hz {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------- literal layouts

// One GPTQ word holds inputs 0..7 of an output column, lowest bits first; the zero point is
// stored minus one in the original format.
TEST(HfQuantTest, GptqLiteralWord) {
  const int32_t qweight[1] = {0x76543210};
  const int32_t qzeros[1] = {0x00000007};  // column 0: stored 7, meaning 8
  const float scales[1] = {0.5f};
  // in 8, out 1 is not a multiple of the pack; the dequantizer reads column 0 only.
  float w[8];
  dequant_gptq_rows(qweight, qzeros, scales, nullptr, 8, 1, 4, 8, 1, 0, 1, w);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(w[i], 0.5f * static_cast<float>(i - 8)) << i;
  // gptq_v2 stores the zero point as it is.
  dequant_gptq_rows(qweight, qzeros, scales, nullptr, 8, 1, 4, 8, 0, 0, 1, w);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(w[i], 0.5f * static_cast<float>(i - 7)) << i;
}

// AWQ packs output columns 0 2 4 6 1 3 5 7 into nibbles 0..7: a word with nibble k = k holds
// column j's value at nibble {0,4,1,5,2,6,3,7}[j].
TEST(HfQuantTest, AwqLiteralWord) {
  const int32_t qweight[1] = {0x76543210};
  const int32_t qzeros[1] = {0};
  float scales[8];
  for (float& s : scales) s = 1.0f;
  float w[8];  // 8 output rows of 1 input each
  dequant_awq_rows(qweight, qzeros, scales, 1, 8, 1, 0, 8, w);
  const float expected[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(w[j], expected[j]) << j;
}

TEST(HfQuantTest, Scaled8Literal) {
  // E4M3 0x38 = 1.0, 0xC0 = -2.0, 0x01 = 2^-9; int8 -128.
  const uint8_t w[4] = {0x38, 0xC0, 0x01, 0x80};
  const float scale[2] = {3.0f, 0.25f};  // blocks of 1 row x 2 columns
  float out[4];
  dequant_scaled8_rows(w, true, 4, scale, 1, 2, 0, 1, out);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], -6.0f);
  EXPECT_EQ(out[2], 0.25f / 512.0f);
  EXPECT_EQ(out[3], -0.0f);
  dequant_scaled8_rows(w, false, 4, scale, 1, 2, 0, 1, out);
  EXPECT_EQ(out[0], 56.0f * 3.0f);
  EXPECT_EQ(out[1], -64.0f * 3.0f);
  EXPECT_EQ(out[3], -128.0f * 0.25f);
}

// ---------------------------------------------------------------- packers written here

struct PackedInt {
  std::vector<int32_t> qweight, qzeros, g_idx;
  std::vector<uint16_t> scales_f16;
  std::vector<float> expected;  // [out][in]
  int64_t groups = 0;
};

float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

// Asymmetric min/max quantization of w [out][in] into groups of inputs (`g_idx` given or i /
// group), packed as GPTQ (awq = false) or AWQ lays it out.
PackedInt pack_int(const std::vector<float>& w, int64_t out, int64_t in, int bits, int64_t group, bool awq,
                   int zero_offset, bool act_order) {
  PackedInt p;
  const int64_t pack = 32 / bits;
  const int top = (1 << bits) - 1;
  p.groups = (in + group - 1) / group;
  std::vector<int32_t> gi(in);
  for (int64_t i = 0; i < in; ++i) gi[i] = static_cast<int32_t>((act_order ? (i * 5 + 3) % in : i) / group);
  std::vector<float> scale(p.groups * out);
  std::vector<int> zero(p.groups * out);
  for (int64_t g = 0; g < p.groups; ++g) {
    for (int64_t o = 0; o < out; ++o) {
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < in; ++i) {
        if (gi[i] != g) continue;
        lo = std::min(lo, w[o * in + i]);
        hi = std::max(hi, w[o * in + i]);
      }
      float s = round_f16(std::max((hi - lo) / static_cast<float>(top), 1e-6f));
      scale[g * out + o] = s;
      // The original GPTQ format cannot store a zero point of 0 (it keeps zero - 1).
      zero[g * out + o] = std::clamp(static_cast<int>(std::lround(-lo / s)), zero_offset, top);
    }
  }
  std::vector<int> q(in * out);
  p.expected.resize(out * in);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      const int64_t g = gi[i];
      const float s = scale[g * out + o];
      const int z = zero[g * out + o];
      const int v = std::clamp(static_cast<int>(std::lround(w[o * in + i] / s)) + z, 0, top);
      q[i * out + o] = v;
      p.expected[o * in + i] = s * static_cast<float>(v - z);
    }
  }
  p.scales_f16.resize(scale.size());
  for (size_t k = 0; k < scale.size(); ++k) p.scales_f16[k] = f32_to_f16(scale[k]);
  static constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // nibble k holds column kAwqOrder[k]
  if (!awq) {
    p.qweight.assign(in / pack * out, 0);
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o)
        p.qweight[(i / pack) * out + o] |= static_cast<int32_t>(static_cast<uint32_t>(q[i * out + o]) << ((i % pack) * bits));
    p.qzeros.assign(p.groups * (out / pack), 0);
    for (int64_t g = 0; g < p.groups; ++g)
      for (int64_t o = 0; o < out; ++o)
        p.qzeros[g * (out / pack) + o / pack] |=
            static_cast<int32_t>(static_cast<uint32_t>((zero[g * out + o] - zero_offset) & top) << ((o % pack) * bits));
    if (act_order) p.g_idx = gi;
  } else {
    p.qweight.assign(in * (out / 8), 0);
    for (int64_t i = 0; i < in; ++i)
      for (int64_t c = 0; c < out / 8; ++c)
        for (int k = 0; k < 8; ++k)
          p.qweight[i * (out / 8) + c] |= static_cast<int32_t>(static_cast<uint32_t>(q[i * out + c * 8 + kAwqOrder[k]]) << (4 * k));
    p.qzeros.assign(p.groups * (out / 8), 0);
    for (int64_t g = 0; g < p.groups; ++g)
      for (int64_t c = 0; c < out / 8; ++c)
        for (int k = 0; k < 8; ++k)
          p.qzeros[g * (out / 8) + c] |= static_cast<int32_t>(static_cast<uint32_t>(zero[g * out + c * 8 + kAwqOrder[k]]) << (4 * k));
  }
  return p;
}

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> w(rows * cols);
  for (float& x : w) x = d(rng);
  return w;
}

TEST(HfQuantTest, GptqMatchesPackerAllWidths) {
  for (int bits : {2, 4, 8}) {
    for (bool act : {false, true}) {
      for (int offset : {0, 1}) {
        SCOPED_TRACE(testing::Message() << bits << " bits, act_order " << act << ", offset " << offset);
        const int64_t out = 48, in = 96, group = 32;
        auto w = random_matrix(out, in, 7 + bits);
        PackedInt p = pack_int(w, out, in, bits, group, false, offset, act);
        std::vector<float> scales(p.scales_f16.size());
        for (size_t k = 0; k < scales.size(); ++k) scales[k] = f16_to_f32(p.scales_f16[k]);
        std::vector<float> got(out * in);
        // In two row ranges, as the loader's threads split them.
        dequant_gptq_rows(p.qweight.data(), p.qzeros.data(), scales.data(), act ? p.g_idx.data() : nullptr, in, out, bits,
                          group, offset, 0, 17, got.data());
        dequant_gptq_rows(p.qweight.data(), p.qzeros.data(), scales.data(), act ? p.g_idx.data() : nullptr, in, out, bits,
                          group, offset, 17, out, got.data() + 17 * in);
        ASSERT_EQ(got, p.expected);
        // The quantization is close to the weights it came from (the packer is not degenerate).
        double err = 0, mag = 0;
        for (size_t k = 0; k < w.size(); ++k) {
          err += std::fabs(got[k] - w[k]);
          mag += std::fabs(w[k]);
        }
        EXPECT_LT(err / mag, bits == 2 ? 0.5 : bits == 4 ? 0.12 : 0.01);
      }
    }
  }
}

TEST(HfQuantTest, AwqMatchesPacker) {
  const int64_t out = 40, in = 64, group = 16;
  auto w = random_matrix(out, in, 3);
  PackedInt p = pack_int(w, out, in, 4, group, true, 0, false);
  std::vector<float> scales(p.scales_f16.size());
  for (size_t k = 0; k < scales.size(); ++k) scales[k] = f16_to_f32(p.scales_f16[k]);
  std::vector<float> got(out * in);
  dequant_awq_rows(p.qweight.data(), p.qzeros.data(), scales.data(), in, out, group, 0, out, got.data());
  ASSERT_EQ(got, p.expected);
}

// ---------------------------------------------------------------- quantization_config

Result<HfQuantConfig> parse(const char* text) { return parse_hf_quant_config(json::parse(text), "config.json"); }

TEST(HfQuantTest, ParsesConfigs) {
  auto none = parse(R"({"hidden_size": 8})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->method, HfQuantMethod::kNone);
  auto fp8 = parse(R"({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 64]}})");
  ASSERT_TRUE(fp8.ok()) << fp8.status().message();
  EXPECT_EQ(fp8->method, HfQuantMethod::kFp8);
  EXPECT_EQ(fp8->block_rows, 128);
  EXPECT_EQ(fp8->block_cols, 64);
  auto ct = parse(R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}}}}})");
  ASSERT_TRUE(ct.ok()) << ct.status().message();
  EXPECT_EQ(ct->method, HfQuantMethod::kFp8);
  auto gptq = parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true, "sym": true}})");
  ASSERT_TRUE(gptq.ok()) << gptq.status().message();
  EXPECT_EQ(gptq->method, HfQuantMethod::kGptq);
  EXPECT_EQ(gptq->zero_offset, 1);
  EXPECT_EQ(gptq->group_size, 128);
  EXPECT_EQ(gptq->describe(), "GPTQ 4-bit, groups of 128");
  auto v2 = parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": -1, "checkpoint_format": "gptq_v2"}})");
  ASSERT_TRUE(v2.ok()) << v2.status().message();
  EXPECT_EQ(v2->zero_offset, 0);
  EXPECT_EQ(v2->group_size, 0);
  auto awq = parse(R"({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm"}})");
  ASSERT_TRUE(awq.ok()) << awq.status().message();
  EXPECT_EQ(awq->method, HfQuantMethod::kAwq);
}

TEST(HfQuantTest, RefusesWhatItCannotLoad) {
  struct Case {
    const char* config;
    const char* names;
  } cases[] = {
      {R"({"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true}})", "quant_method 'bitsandbytes'"},
      {R"({"quantization_config": {"quant_method": "gptq", "bits": 3, "group_size": 128}})", "quantization_config.bits = 3"},
      {R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 0}})", "group_size"},
      {R"({"quantization_config": {"quant_method": "awq", "bits": 4, "version": "gemv"}})", "version 'gemv'"},
      {R"({"quantization_config": {"quant_method": "awq", "bits": 4, "zero_point": false}})", "zero_point"},
      {R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [0, 128]}})", "weight_block_size"},
      {R"({"quantization_config": {"quant_method": "fp8", "fmt": "e5m2"}})", "fmt 'e5m2'"},
      {R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {}}})",
       "format 'pack-quantized'"},
      {R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
          "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float", "strategy": "tensor"}}}}})",
       "config_groups.g.weights"},
      {R"({"quantization_config": "fp8"})", "must be an object"},
  };
  for (const Case& c : cases) {
    auto r = parse(c.config);
    ASSERT_FALSE(r.ok()) << c.config;
    EXPECT_NE(r.status().message().find(c.names), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("config.json"), std::string::npos) << r.status().message();
  }
}

// ---------------------------------------------------------------- folders

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

bool is_attention(const std::string& name) { return name.find("self_attn.") != std::string::npos && name.ends_with("_proj.weight"); }
bool is_linear(const std::string& name) { return name.ends_with("_proj.weight"); }

// A stories260K folder (F32) whose matrices `quantize(name, w, rows, cols, writer, expected)`
// rewrites; expected[gguf name] receives the values each dequantizes to. Returns the folder.
using QuantizeFn = std::function<bool(const std::string&, const std::vector<float>&, int64_t, int64_t, SafetensorsWriter&,
                                      std::vector<float>*)>;
std::string quantized_folder(const std::string& prefix, const json& qconfig, const QuantizeFn& quantize,
                             std::map<std::string, std::vector<float>>* expected) {
  std::string dir = test::make_temp_dir(prefix);
  Status s = test::write_hf_folder(test::model_path("stories260K.gguf"), dir, {});
  EXPECT_TRUE(s.ok()) << s.message();
  auto f = SafetensorsFile::open(dir + "/model.safetensors");
  EXPECT_TRUE(f.ok()) << f.status().message();
  SafetensorsWriter w;
  for (const SafetensorsTensor& t : f->tensors()) {
    EXPECT_EQ(t.dtype_name, "F32");
    std::vector<float> v(t.num_bytes() / 4);
    std::memcpy(v.data(), t.data, t.num_bytes());
    std::vector<float> exp;
    if (t.shape.size() == 2 && quantize(t.name, v, static_cast<int64_t>(t.shape[0]), static_cast<int64_t>(t.shape[1]), w, &exp)) {
      (*expected)[*gguf_name_for_hf(t.name)] = std::move(exp);
      continue;
    }
    w.add(t.name, "F32", t.shape, bytes_of(v.data(), t.num_bytes()));
  }
  EXPECT_TRUE(w.write(dir + "/model.safetensors").ok());
  std::ifstream in(dir + "/config.json");
  json config = json::parse(in);
  config["quantization_config"] = qconfig;
  std::ofstream(dir + "/config.json") << config.dump(2);
  return dir;
}

// The folder loads (as F32: exactly the expected values; as Q8_0: their encoding) and decodes the
// golden prompt's first step within `tol` of the golden probabilities.
void check_folder(const std::string& dir, const std::map<std::string, std::vector<float>>& expected, float tol) {
  auto cfg_text = std::ifstream(dir + "/config.json");
  HfQuantConfig q = *parse_hf_quant_config(json::parse(cfg_text), "config.json");
  ASSERT_FALSE(expected.empty());
  for (DType type : {DType::kF32, DType::kQ8_0}) {
    auto src = HfTensorSource::open(dir, q, type);
    ASSERT_TRUE(src.ok()) << src.status().message();
    EXPECT_EQ((*src)->dequantized().num_tensors, static_cast<int64_t>(expected.size()));
    for (const auto& [name, values] : expected) {
      SCOPED_TRACE(name);
      const TensorInfo* t = (*src)->get_tensor(name);
      ASSERT_NE(t, nullptr);
      const int64_t cols = static_cast<int64_t>(t->dims[0]), rows = static_cast<int64_t>(t->dims[1]);
      ASSERT_EQ(static_cast<size_t>(rows * cols), values.size());
      const DType want = cols % 32 == 0 ? type : DType::kF32;
      ASSERT_EQ(t->dtype, want);
      std::vector<uint8_t> enc(row_bytes(want, cols) * rows);
      for (int64_t r = 0; r < rows; ++r) kernels::encode_row(want, values.data() + r * cols, enc.data() + r * row_bytes(want, cols), cols);
      ASSERT_EQ(t->num_bytes, enc.size());
      EXPECT_EQ(std::memcmp(t->data, enc.data(), enc.size()), 0);
    }
  }
  auto m = Model::load(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(1);
  test::GoldenFile g = test::load_golden("stories260K.json");
  SingleSequence seq(**m, pool, {.max_tokens = 512});
  std::vector<float> logits = seq.append(g.cases[0].prompt_ids);
  auto p = test::softmax_probs(logits.data(), (*m)->config().vocab);
  for (const auto& [id, prob] : g.cases[0].top5[0]) EXPECT_NEAR(p[id], prob, tol) << id;
}

// E4M3 with a scale per block (block_rows x block_cols) of the matrix: amax / 448.
bool fp8_block(int64_t br, int64_t bc, bool inv_name, const std::string& name, const std::vector<float>& w, int64_t rows,
               int64_t cols, SafetensorsWriter& out, std::vector<float>* expected) {
  if (!is_linear(name)) return false;
  const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
  std::vector<float> scale(sr * sc);
  for (int64_t a = 0; a < sr; ++a)
    for (int64_t b = 0; b < sc; ++b) {
      float amax = 0;
      for (int64_t r = a * br; r < std::min(rows, (a + 1) * br); ++r)
        for (int64_t c = b * bc; c < std::min(cols, (b + 1) * bc); ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      scale[a * sc + b] = amax > 0 ? amax / 448.0f : 1.0f;
    }
  std::vector<uint8_t> q(rows * cols);
  expected->resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = scale[(r / br) * sc + c / bc];
      q[r * cols + c] = kernels::f32_to_e4m3(w[r * cols + c] / s);
      (*expected)[r * cols + c] = kernels::e4m3_to_f32(q[r * cols + c]) * s;
    }
  out.add(name, "F8_E4M3", {static_cast<uint64_t>(rows), static_cast<uint64_t>(cols)}, q);
  std::vector<uint64_t> sshape = {static_cast<uint64_t>(sr), static_cast<uint64_t>(sc)};
  if (sr == 1 && sc == 1) sshape = {};
  else if (sc == 1) sshape = {static_cast<uint64_t>(sr), 1};
  out.add(name + (inv_name ? "_scale_inv" : "_scale"), "F32", sshape, bytes_of(scale.data(), scale.size() * 4));
  const float input_scale = 1.0f;
  out.add(name.substr(0, name.size() - 7) + ".input_scale", "F32", {}, bytes_of(&input_scale, 4));
  return true;
}

TEST(HfQuantFolderTest, Fp8BlockScales) {
  std::map<std::string, std::vector<float>> expected;
  json q = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {16, 32}}};
  std::string dir = quantized_folder("hfq_fp8", q, [](auto&&... a) { return fp8_block(16, 32, true, a...); }, &expected);
  check_folder(dir, expected, 0.05f);
  fs::remove_all(dir);
}

TEST(HfQuantFolderTest, Fp8PerChannelAndPerTensor) {
  for (bool channel : {true, false}) {
    SCOPED_TRACE(channel ? "channel" : "tensor");
    std::map<std::string, std::vector<float>> expected;
    json q = {{"quant_method", "compressed-tensors"},
              {"format", "float-quantized"},
              {"config_groups",
               {{"group_0", {{"targets", {"Linear"}}, {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", channel ? "channel" : "tensor"}}}}}}}};
    std::string dir = quantized_folder(
        "hfq_ct", q,
        [channel](const std::string& name, const std::vector<float>& w, int64_t rows, int64_t cols, SafetensorsWriter& out,
                  std::vector<float>* exp) { return fp8_block(channel ? 1 : rows, cols, false, name, w, rows, cols, out, exp); },
        &expected);
    check_folder(dir, expected, 0.05f);
    fs::remove_all(dir);
  }
}

// compressed-tensors int-quantized (W8A8-INT8 checkpoints): int8 weights, one f32 scale per row.
TEST(HfQuantFolderTest, Int8PerChannel) {
  std::map<std::string, std::vector<float>> expected;
  json q = {{"quant_method", "compressed-tensors"},
            {"format", "int-quantized"},
            {"config_groups",
             {{"group_0", {{"targets", {"Linear"}}, {"weights", {{"num_bits", 8}, {"type", "int"}, {"strategy", "channel"}, {"symmetric", true}}}}}}}};
  std::string dir = quantized_folder(
      "hfq_i8", q,
      [](const std::string& name, const std::vector<float>& w, int64_t rows, int64_t cols, SafetensorsWriter& out,
         std::vector<float>* exp) {
        if (!is_linear(name)) return false;
        std::vector<float> scale(rows);
        std::vector<uint8_t> qv(rows * cols);
        exp->resize(rows * cols);
        for (int64_t r = 0; r < rows; ++r) {
          float amax = 0;
          for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
          scale[r] = amax > 0 ? amax / 127.0f : 1.0f;
          for (int64_t c = 0; c < cols; ++c) {
            const int v = static_cast<int>(std::lround(w[r * cols + c] / scale[r]));
            qv[r * cols + c] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(v, -127, 127)));
            (*exp)[r * cols + c] = static_cast<float>(static_cast<int8_t>(qv[r * cols + c])) * scale[r];
          }
        }
        out.add(name, "I8", {static_cast<uint64_t>(rows), static_cast<uint64_t>(cols)}, qv);
        out.add(name + "_scale", "F32", {static_cast<uint64_t>(rows), 1}, bytes_of(scale.data(), scale.size() * 4));
        return true;
      },
      &expected);
  check_folder(dir, expected, 0.02f);
  fs::remove_all(dir);
}

void add_packed(const std::string& name, const PackedInt& p, int64_t in, int64_t out, bool awq, SafetensorsWriter& w) {
  const std::string base = name.substr(0, name.size() - 7);
  const uint64_t qrows = awq ? static_cast<uint64_t>(in) : p.qweight.size() / static_cast<uint64_t>(out);
  const uint64_t qcols = awq ? static_cast<uint64_t>(out / 8) : static_cast<uint64_t>(out);
  w.add(base + ".qweight", "I32", {qrows, qcols}, bytes_of(p.qweight.data(), p.qweight.size() * 4));
  w.add(base + ".qzeros", "I32", {static_cast<uint64_t>(p.groups), p.qzeros.size() / static_cast<uint64_t>(p.groups)},
        bytes_of(p.qzeros.data(), p.qzeros.size() * 4));
  w.add(base + ".scales", "F16", {static_cast<uint64_t>(p.groups), static_cast<uint64_t>(out)},
        bytes_of(p.scales_f16.data(), p.scales_f16.size() * 2));
  if (!p.g_idx.empty()) w.add(base + ".g_idx", "I32", {static_cast<uint64_t>(in)}, bytes_of(p.g_idx.data(), p.g_idx.size() * 4));
}

// A QuantizeFn packing the attention matrices as GPTQ (`awq` false) or AWQ with groups of 32.
QuantizeFn packed_attention(int bits, bool awq, int zero_offset, bool act_order) {
  return [=](const std::string& name, const std::vector<float>& w, int64_t rows, int64_t cols, SafetensorsWriter& out,
             std::vector<float>* exp) {
    if (!is_attention(name)) return false;
    PackedInt p = pack_int(w, rows, cols, bits, 32, awq, zero_offset, act_order);
    add_packed(name, p, cols, rows, awq, out);
    *exp = p.expected;
    return true;
  };
}

// The attention matrices (64 x 64) quantized; the feed-forward's 172-wide ones stay F32, as a
// checkpoint's modules_to_not_convert leaves some.
TEST(HfQuantFolderTest, GptqAttention) {
  struct Variant {
    int bits;
    bool act_order;
    const char* format;
    float tol;
  } variants[] = {{4, false, "gptq", 0.08f}, {8, true, "gptq_v2", 0.02f}, {4, true, "gptq", 0.08f}};
  for (const Variant& v : variants) {
    SCOPED_TRACE(testing::Message() << v.bits << " bits " << v.format << " act_order " << v.act_order);
    std::map<std::string, std::vector<float>> expected;
    json q = {{"quant_method", "gptq"}, {"bits", v.bits}, {"group_size", 32}, {"desc_act", v.act_order}, {"sym", false},
              {"checkpoint_format", v.format}};
    const int offset = std::string(v.format) == "gptq" ? 1 : 0;
    std::string dir = quantized_folder("hfq_gptq", q, packed_attention(v.bits, false, offset, v.act_order), &expected);
    check_folder(dir, expected, v.tol);
    fs::remove_all(dir);
  }
}

TEST(HfQuantFolderTest, AwqAttention) {
  std::map<std::string, std::vector<float>> expected;
  json q = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 32}, {"zero_point", true}, {"version", "gemm"}};
  std::string dir = quantized_folder("hfq_awq", q, packed_attention(4, true, 0, false), &expected);
  check_folder(dir, expected, 0.08f);
  fs::remove_all(dir);
}

// Rewrites one tensor of a folder's model.safetensors (or drops it when `bytes` is empty).
void rewrite(const std::string& dir, const std::string& name, const std::string& dtype, std::vector<uint64_t> shape,
             std::vector<uint8_t> bytes) {
  auto f = SafetensorsFile::open(dir + "/model.safetensors");
  ASSERT_TRUE(f.ok());
  SafetensorsWriter w;
  for (const SafetensorsTensor& t : f->tensors()) {
    if (t.name != name) {
      w.add(t.name, t.dtype_name, t.shape, bytes_of(t.data, t.num_bytes()));
    } else if (!bytes.empty()) {
      w.add(name, dtype, shape, bytes);
    }
  }
  const std::string tmp = dir + "/model.safetensors.new";
  ASSERT_TRUE(w.write(tmp).ok());
  fs::rename(tmp, dir + "/model.safetensors");
}

TEST(HfQuantFolderTest, BrokenCheckpointsRefused) {
  json q = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", true}};
  auto make = [&](const char* prefix) {
    std::map<std::string, std::vector<float>> expected;
    return quantized_folder(prefix, q, packed_attention(4, false, 1, true), &expected);
  };
  const std::string base = "model.layers.0.self_attn.q_proj";
  auto expect_error = [](const std::string& dir, const std::string& part) {
    auto m = Model::load(dir);
    ASSERT_FALSE(m.ok()) << part;
    EXPECT_NE(m.status().message().find(part), std::string::npos) << m.status().message();
  };
  {
    std::string dir = make("hfq_bad1");
    rewrite(dir, base + ".scales", "", {}, {});
    expect_error(dir, base + ".scales' (scales) is missing");
    fs::remove_all(dir);
  }
  {
    std::string dir = make("hfq_bad2");
    std::vector<int32_t> g(64, 0);
    g[5] = 2;  // two groups only
    rewrite(dir, base + ".g_idx", "I32", {64}, bytes_of(g.data(), g.size() * 4));
    expect_error(dir, "puts input 5 in group 2");
    fs::remove_all(dir);
  }
  {
    std::string dir = make("hfq_bad3");
    std::vector<int32_t> z(3 * 8, 0);
    rewrite(dir, base + ".qzeros", "I32", {3, 8}, bytes_of(z.data(), z.size() * 4));
    expect_error(dir, base + ".qzeros' has shape [3, 8]");
    fs::remove_all(dir);
  }
  {
    std::string dir = make("hfq_bad4");
    std::vector<uint16_t> s(2 * 64, 0x7c00);  // +infinity
    rewrite(dir, base + ".scales", "F16", {2, 64}, bytes_of(s.data(), s.size() * 2));
    expect_error(dir, base + ".qweight' dequantizes to NaN or infinity");
    fs::remove_all(dir);
  }
  {
    // Packed tensors but no quantization_config.
    std::string dir = make("hfq_bad5");
    std::ifstream in(dir + "/config.json");
    json config = json::parse(in);
    config.erase("quantization_config");
    std::ofstream(dir + "/config.json") << config.dump(2);
    expect_error(dir, "quantization_config is missing");
    fs::remove_all(dir);
  }
  {
    // An FP8 matrix without its scale.
    std::map<std::string, std::vector<float>> expected;
    json fq = {{"quant_method", "fp8"}};
    std::string dir = quantized_folder("hfq_bad6", fq, [](auto&&... a) { return fp8_block(1, 1 << 20, true, a...); }, &expected);
    rewrite(dir, base + ".weight_scale_inv", "", {}, {});
    expect_error(dir, "has no " + base + ".weight_scale_inv or");
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace hz
