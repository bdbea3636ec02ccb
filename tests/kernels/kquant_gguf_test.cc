// k-quant layouts checked on real llama.cpp output: synth-small-{q6_k,q5_k_m,q4_k_m}.gguf hold the
// same random weights quantized three ways, so a correct Q4_K/Q5_K/Q6_K decoder must recover the
// same tensors up to quantization error (a layout mistake decorrelates them completely). Also the
// AVX2 dots against the reference and the matmul/vec_dot contract on these real blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "format/gguf.h"
#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"
#include "support/test_support.h"

namespace hz::kernels {
namespace {

struct Models {
  std::vector<GgufFile> files;  // q6_k, q5_k_m, q4_k_m
};

bool load_models(Models* m) {
  for (const char* name : {"synth-small-q6_k.gguf", "synth-small-q5_k_m.gguf", "synth-small-q4_k_m.gguf"}) {
    const std::string path = hz::test::model_path(name);
    if (!std::filesystem::exists(path)) return false;
    auto f = GgufFile::open(path);
    EXPECT_TRUE(f.ok()) << path;
    if (!f.ok()) return false;
    m->files.push_back(std::move(f.value()));
  }
  return true;
}

std::vector<float> dequantize_tensor(const GgufTensorInfo& t) {
  std::vector<float> out(t.num_elements());
  ref::dequantize_row(t.dtype, t.data, out.data(), static_cast<int64_t>(t.num_elements()));
  return out;
}

TEST(KQuantGgufTest, QuantizationsOfTheSameWeightsAgree) {
  Models m;
  if (!load_models(&m)) GTEST_SKIP() << "synth-small models not found";
  int compared[3] = {0, 0, 0};  // by type of the lower-precision tensor: q6_K, q5_K, q4_K
  for (const auto& t6 : m.files[0].tensors()) {
    if (t6.dtype != DType::kQ6_K) continue;
    const auto ref6 = dequantize_tensor(t6);
    double norm = 0.0;
    for (float v : ref6) norm += static_cast<double>(v) * v;
    ASSERT_GT(norm, 0.0) << t6.name;
    for (size_t k = 1; k < 3; ++k) {
      const GgufTensorInfo* t = m.files[k].get_tensor(t6.name);
      ASSERT_NE(t, nullptr) << t6.name;
      if (t->dtype == DType::kQ6_K) continue;  // same bytes, nothing learned
      const auto other = dequantize_tensor(*t);
      ASSERT_EQ(other.size(), ref6.size());
      double err = 0.0;
      for (size_t i = 0; i < other.size(); ++i) err += (other[i] - ref6[i]) * static_cast<double>(other[i] - ref6[i]);
      const double rel = std::sqrt(err / norm);
      // Measured 0.040 (Q5_K) and 0.074 (Q4_K); a wrong layout gives about 1.4.
      if (t->dtype == DType::kQ5_K) {
        EXPECT_LT(rel, 0.05) << t6.name;
        ++compared[1];
      } else if (t->dtype == DType::kQ4_K) {
        EXPECT_LT(rel, 0.09) << t6.name;
        ++compared[2];
      }
      EXPECT_GT(rel, 0.01) << t6.name;  // genuinely different quantizations
    }
  }
  EXPECT_GT(compared[1], 5);
  EXPECT_GT(compared[2], 5);
}

TEST(KQuantGgufTest, DotsOnRealBlocks) {
  Models m;
  if (!load_models(&m)) GTEST_SKIP() << "synth-small models not found";
  for (size_t k = 0; k < 3; ++k) {
    const GgufTensorInfo* t = m.files[k].get_tensor("blk.0.ffn_up.weight");
    ASSERT_NE(t, nullptr);
    const int64_t n = static_cast<int64_t>(t->dims[0]), rows = 24;
    const uint64_t wrb = row_bytes(t->dtype, n), xrb = activation_row_bytes(t->dtype, n);
    const int64_t tokens = 5;
    auto x = test::make_activations(t->dtype, tokens, n, 77);
    std::vector<float> w_row(n), x_row(n);
    std::vector<float> single(tokens * rows);
    for (int64_t tk = 0; tk < tokens; ++tk) {
      ref::dequantize_row(activation_type(t->dtype), x.data() + tk * xrb, x_row.data(), n);
      for (int64_t r = 0; r < rows; ++r) {
        ref::dequantize_row(t->dtype, t->data + r * wrb, w_row.data(), n);
        double expect = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          expect += static_cast<double>(w_row[i]) * x_row[i];
          mag += std::fabs(static_cast<double>(w_row[i]) * x_row[i]);
        }
        float rd;
        ref::vec_dot(t->dtype, n, t->data + r * wrb, x.data() + tk * xrb, &rd);
        EXPECT_NEAR(rd, expect, 1e-5 * mag) << dtype_name(t->dtype);
        if (!isa_supported(Isa::kAvx2)) continue;
        avx2::vec_dot(t->dtype, n, t->data + r * wrb, x.data() + tk * xrb, &single[tk * rows + r]);
        EXPECT_NEAR(single[tk * rows + r], rd, 2e-6 * mag) << dtype_name(t->dtype);
      }
    }
    if (!isa_supported(Isa::kAvx2)) continue;
    std::vector<float> y(tokens * rows);
    avx2::matmul(t->dtype, n, t->data, wrb, 1, rows, x.data(), xrb, tokens, y.data(), rows);
    for (int64_t tk = 0; tk < tokens; ++tk) {
      for (int64_t r = 1; r < rows; ++r) {
        EXPECT_EQ(test::float_bits(y[tk * rows + r]), test::float_bits(single[tk * rows + r])) << dtype_name(t->dtype);
      }
    }
  }
}

}  // namespace
}  // namespace hz::kernels
