// RoPE scaling: rotation angles against values computed by hand (Python, double precision) from the
// published formulas — linear interpolation, NTK-aware base stretching, YaRN's ramp and attention
// factor, Llama 3.1's frequency-dependent divisors — plus metadata reading, the rope_freqs tensor
// and the user overrides.
#include <gtest/gtest.h>

#include <cmath>

#include "format/gguf.h"
#include "model/model.h"
#include "model/rope.h"
#include "model/rope_scaling.h"
#include "support/test_support.h"
#include "support/tiny_model.h"

namespace hz {
namespace {

RopeConfig base_config(int32_t dim, float base) {
  RopeConfig c;
  c.dim = dim;
  c.freq_base = base;
  c.orig_ctx = 4096;
  return c;
}

void expect_angle(const Rope& r, int64_t pos, int32_t i, double want) {
  EXPECT_NEAR(r.angle(pos, i), want, std::fabs(want) * 2e-6 + 1e-7) << "pair " << i;
}

TEST(RopeScalingTest, NoneIsPosTimesBasePower) {
  RopeConfig c = base_config(128, 10000.0f);
  ASSERT_TRUE(apply_rope_overrides({}, &c).ok());
  Rope r(c, 128);
  expect_angle(r, 1000, 0, 1000.0);
  expect_angle(r, 1000, 10, 237.13737056616552);  // 1000 * 10000^(-20/128)
  expect_angle(r, 1000, 63, 1000 * std::pow(10000.0, -126.0 / 128));
  EXPECT_EQ(r.mscale(), 1.0f);
}

TEST(RopeScalingTest, LinearDividesPositions) {
  RopeConfig c = base_config(128, 10000.0f);
  ASSERT_TRUE(apply_rope_overrides({.scaling = RopeScaling::kLinear, .freq_scale = 0.25f}, &c).ok());
  Rope r(c, 128);
  expect_angle(r, 1000, 0, 250.0);
  expect_angle(r, 1000, 10, 237.13737056616552 / 4);
}

TEST(RopeScalingTest, NtkStretchesTheBase) {
  // factor 4, dim 64: base' = 10000 * 4^(64/62) = 41829.3659...; positions unscaled.
  RopeConfig c = base_config(64, 10000.0f);
  ASSERT_TRUE(apply_rope_overrides({.scaling = RopeScaling::kNtk, .freq_scale = 0.25f}, &c).ok());
  Rope r(c, 64);
  expect_angle(r, 1000, 0, 1000.0);
  expect_angle(r, 1000, 1, 717.0983281048126);
  expect_angle(r, 1000, 16, 4.889442681677164);
  expect_angle(r, 1000, 31, 0.03333803580408311);
}

TEST(RopeScalingTest, YarnRampsBetweenExtrapolationAndInterpolation) {
  // dim 128, base 10000, original context 4096, factor 8, beta_fast 32, beta_slow 1:
  // correction range [floor(20.94), ceil(45.03)] = [20, 46]; pairs below 20 keep their frequency,
  // pairs from 46 on are divided by 8, a linear ramp between.
  RopeConfig c = base_config(128, 10000.0f);
  ASSERT_TRUE(apply_rope_overrides({.scaling = RopeScaling::kYarn, .freq_scale = 0.125f}, &c).ok());
  EXPECT_EQ(c.ext_factor, 1.0f);
  Rope r(c, 128);
  expect_angle(r, 1000, 0, 1000.0);
  expect_angle(r, 1000, 10, 237.13737056616552);
  expect_angle(r, 1000, 20, 56.23413251903491);
  expect_angle(r, 1000, 30, 8.847401809545133);
  expect_angle(r, 1000, 40, 1.0338215427473547);
  expect_angle(r, 1000, 46, 0.1666901790204155);
  expect_angle(r, 1000, 63, 0.014434774808618227);
  // Attention factor 0.1 ln(8) + 1 on cos and sin: position 0 maps (1, 0) to (1.2079, 0).
  EXPECT_NEAR(r.mscale(), 1.2079441541679836, 1e-6);
  std::vector<float> v(128, 0.0f);
  v[0] = 1.0f;
  r.apply(v.data(), 1, 0);
  EXPECT_NEAR(v[0], 1.2079441541679836, 1e-6);
  EXPECT_EQ(v[1], 0.0f);
}

TEST(RopeScalingTest, Llama3FrequencyDependentDivisors) {
  // Llama 3.1: base 500000, factor 8, low 1, high 4, original context 8192. Wavelengths under
  // 2048 keep their frequency, over 8192 are divided by 8, smooth between.
  const std::vector<float> f = llama3_freq_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[28], 1.0f);
  EXPECT_NEAR(f[30], 1.5534146285049255, 1e-5);
  EXPECT_NEAR(f[32], 2.6945296878947333, 1e-5);
  EXPECT_NEAR(f[34], 5.257326588708467, 1e-5);
  EXPECT_EQ(f[36], 8.0f);
  EXPECT_EQ(f[63], 8.0f);

  RopeConfig c = base_config(128, 500000.0f);
  c.orig_ctx = 8192;
  ASSERT_TRUE(apply_rope_overrides({.scaling = RopeScaling::kLlama3, .freq_scale = 0.125f}, &c).ok());
  EXPECT_EQ(c.freq_scale, 1.0f);  // the divisors carry the scaling
  Rope r(c, 128);
  expect_angle(r, 1000, 0, 1000.0);
  expect_angle(r, 1000, 28, 3.211445994752591);
  expect_angle(r, 1000, 30, 1.3718935677611381);
  expect_angle(r, 1000, 32, 0.5248461609929546);
  expect_angle(r, 1000, 34, 0.1785078127679964);
  expect_angle(r, 1000, 36, 0.0778465527393245);
}

TEST(RopeScalingTest, Llama3WithoutFactorIsAnError) {
  RopeConfig c = base_config(128, 500000.0f);
  Status s = apply_rope_overrides({.scaling = RopeScaling::kLlama3}, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--rope-freq-scale"), std::string::npos) << s.message();
}

TEST(RopeScalingTest, BadOverridesNameTheFlag) {
  RopeConfig c = base_config(128, 10000.0f);
  EXPECT_NE(apply_rope_overrides({.freq_base = 0.5f}, &c).message().find("--rope-freq-base"), std::string::npos);
  EXPECT_NE(apply_rope_overrides({.freq_scale = -1.0f}, &c).message().find("--rope-freq-scale"), std::string::npos);
  EXPECT_NE(apply_rope_overrides({.orig_ctx = 0}, &c).message().find("--yarn-orig-ctx"), std::string::npos);
  auto bad = parse_rope_scaling("longrope", "--rope-scaling");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--rope-scaling"), std::string::npos);
}

// ---- metadata ----

std::string write_tiny(const std::string& name, const std::function<void(GgufWriter&)>& extra) {
  static const std::string dir = test::make_temp_dir("rope_scaling_test");
  test::TinyModelSpec spec;
  spec.head_dim = 16;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.layers = 1;
  test::TinyModel m = test::TinyModel::random(spec);
  std::string path = dir + "/" + name + ".gguf";
  EXPECT_TRUE(m.write(path, extra));
  return path;
}

Result<ModelConfig> config_of(const std::string& path, const RopeOverrides& o = {}) {
  HZ_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  return ModelConfig::from_gguf(f, o);
}

TEST(RopeScalingTest, ReadsYarnMetadata) {
  auto path = write_tiny("yarn", [](GgufWriter& g) {
    g.set_str("llama.rope.scaling.type", "yarn");
    g.set_f32("llama.rope.scaling.factor", 4.0f);
    g.set_u32("llama.rope.scaling.original_context_length", 2048);
    g.set_f32("llama.rope.scaling.yarn_beta_fast", 16.0f);
  });
  auto c = config_of(path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rope.scaling, RopeScaling::kYarn);
  EXPECT_FLOAT_EQ(c->rope.freq_scale, 0.25f);
  EXPECT_EQ(c->rope.orig_ctx, 2048);
  EXPECT_EQ(c->rope.beta_fast, 16.0f);
  EXPECT_EQ(c->rope.ext_factor, 1.0f);
  // Overrides win over the file: the user turns scaling off.
  auto off = config_of(path, {.scaling = RopeScaling::kNone});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->rope.scaling, RopeScaling::kNone);
  EXPECT_EQ(off->rope.freq_scale, 1.0f);
  EXPECT_EQ(off->rope.ext_factor, 0.0f);
}

TEST(RopeScalingTest, LegacyLinearFactorAndBadType) {
  auto lin = config_of(write_tiny("linear", [](GgufWriter& g) { g.set_f32("llama.rope.scale_linear", 2.0f); }));
  ASSERT_TRUE(lin.ok());
  EXPECT_EQ(lin->rope.scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(lin->rope.freq_scale, 0.5f);
  auto bad = config_of(write_tiny("bad_type", [](GgufWriter& g) { g.set_str("llama.rope.scaling.type", "su"); }));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rope.scaling.type"), std::string::npos) << bad.status().message();
  auto neg = config_of(write_tiny("neg_factor", [](GgufWriter& g) { g.set_f32("llama.rope.scaling.factor", -2.0f); }));
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("rope.scaling.factor"), std::string::npos);
}

TEST(RopeScalingTest, RopeFreqsTensorDividesFrequencies) {
  const std::vector<float> divisors = {1.0f, 1.0f, 2.0f, 4.0f, 8.0f, 8.0f, 8.0f, 8.0f};  // head_dim 16 -> 8 pairs
  auto path = write_tiny("rope_freqs", [&](GgufWriter& g) {
    g.add_tensor_data("rope_freqs.weight", DType::kF32, {8}, divisors.data());
  });
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const RopeConfig& rc = (*m)->config().rope;
  EXPECT_EQ(rc.scaling, RopeScaling::kLlama3);
  Rope r(rc, 16);
  for (int32_t i = 0; i < 8; ++i) expect_angle(r, 300, i, 300 * std::pow(10000.0, -2.0 * i / 16) / divisors[i]);
  // --rope-scaling none drops the divisors.
  auto plain = config_of(path, {.scaling = RopeScaling::kNone});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->rope.freq_factors.empty());

  auto wrong = write_tiny("rope_freqs_shape", [&](GgufWriter& g) {
    g.add_tensor_data("rope_freqs.weight", DType::kF32, {4}, divisors.data());
  });
  auto bad = Model::load(wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rope_freqs.weight"), std::string::npos);
}

TEST(RopeScalingTest, ModelLoadAppliesOverrides) {
  auto path = write_tiny("override", nullptr);
  ModelOverrides o;
  o.rope.freq_base = 50000.0f;
  o.rope.scaling = RopeScaling::kLinear;
  o.rope.freq_scale = 0.5f;
  auto m = Model::load(path, o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->config().rope.freq_base, 50000.0f);
  EXPECT_EQ((*m)->config().rope.scaling, RopeScaling::kLinear);
  EXPECT_EQ((*m)->config().rope.freq_scale, 0.5f);
}

}  // namespace
}  // namespace hz
