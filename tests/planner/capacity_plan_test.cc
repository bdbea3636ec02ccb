// Planner figures against hand-computed ones for published model shapes (tests/fixtures/configs)
// and against the real tensor tables of the shared GGUF models.
#include "planner/capacity_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace hz {
namespace {

std::string fixture(const std::string& name) { return std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/configs/" + name; }

ModelShape load(const std::string& name) {
  auto s = load_model_shape(fixture(name));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : ModelShape{};
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ModelShapeTest, ReadsLlama3Config) {
  ModelShape s = load("llama-3-8b.json");
  EXPECT_EQ(s.architecture, "llama");
  EXPECT_EQ(s.num_layers, 32u);
  EXPECT_EQ(s.hidden, 4096u);
  EXPECT_EQ(s.num_heads, 32u);
  EXPECT_EQ(s.num_kv_heads, 8u);
  EXPECT_EQ(s.head_dim, 128u);  // hidden / heads
  EXPECT_EQ(s.ffn, 14336u);
  EXPECT_EQ(s.vocab, 128256u);
  EXPECT_EQ(s.max_positions, 8192u);
  EXPECT_FALSE(s.tied_embeddings);
  EXPECT_FALSE(s.is_moe());
  EXPECT_FALSE(s.is_mla());
}

// Llama-3-8B by hand: embedding and head 128256 x 4096 each; per layer q 4096x4096, k and v
// 1024x4096, o 4096x4096, FFN 3 x 4096 x 14336, two norms of 4096; final norm 4096.
TEST(CapacityPlanTest, Llama3_8B) {
  ModelShape s = load("llama-3-8b.json");
  ParamCounts p = count_params(s);
  EXPECT_EQ(p.total, 8030261248u);
  EXPECT_EQ(p.active, 8030261248u);
  // 65 norm vectors of 4096 stay f32; the 8029995008 matrix weights take the type's bits.
  EXPECT_EQ(weights_bytes(s, DType::kBF16), 8029995008ull * 2 + 266240 * 4);
  EXPECT_EQ(weights_bytes(s, DType::kQ8_0), 8029995008ull / 32 * 34 + 266240 * 4);
  EXPECT_EQ(weights_bytes(s, DType::kQ4_0), 8029995008ull / 32 * 18 + 266240 * 4);
  EXPECT_EQ(weights_bytes(s, DType::kQ4_K), 8029995008ull / 256 * 144 + 266240 * 4);
  EXPECT_EQ(weights_bytes(s, DType::kQ6_K), 8029995008ull / 256 * 210 + 266240 * 4);

  PlanOptions o;
  o.memory_bytes = 24 * kGiB;
  o.max_num_seqs = 16;
  o.max_model_len = 8192;
  o.num_threads = 8;
  auto r = make_plan(s, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->weight_type, "bf16");
  EXPECT_EQ(r->weights_bytes, 16061054976u);
  // Runtime by hand: activations 512 x 4 x (3*4096 + 2*4096 + 2048 + 3*14336) = 128 MiB; logits
  // 16 x 128256 x 4; threads 8 x (256 KiB + 8 x 14336); base 64 MiB.
  EXPECT_EQ(r->overhead.activations, 134217728u);
  EXPECT_EQ(r->overhead.logits, 8208384u);
  EXPECT_EQ(r->overhead.thread_buffers, 3014656u);
  EXPECT_EQ(r->overhead.total(), 212549632u);

  auto j = plan_to_json(*r);
  EXPECT_EQ(j["params_total"], 8030261248u);
  EXPECT_EQ(j["kv_bytes_per_token"]["f16"], 131072);
  EXPECT_EQ(j["kv_bytes_per_token"]["f32"], 262144);
  EXPECT_EQ(j["kv_bytes_per_token"]["fp8"], 65664);
  EXPECT_EQ(j["kv_bytes_per_token"]["int8"], 69632);
  EXPECT_EQ(j["kv_bytes_per_token"]["int4"], 36864);
  // 16 sequences at f16: (24 GiB - weights - runtime) / 16 / (16 x 131072 B per block) = 283 blocks.
  EXPECT_EQ(j["max_context"]["f16"]["16"], 283 * 16);
  // One sequence: memory allows 72496 tokens, the model stops at 8192.
  EXPECT_EQ(j["max_context"]["f16"]["1"], 8192);
  EXPECT_FALSE(r->max_context[1].cells[3].limited_by_model);
  EXPECT_TRUE(r->max_context[1].cells[0].limited_by_model);

  // 16 x 8192 tokens of f16 KV = 16 GiB on top of 15 GiB of weights: does not fit in 24 GiB.
  EXPECT_EQ(r->requested_kv_bytes, 16ull * 8192 * 131072);
  EXPECT_EQ(r->required_bytes, 16061054976u + 212549632u + 17179869184u);
  EXPECT_FALSE(r->fits);
  ASSERT_GE(r->remedies.size(), 6u);
  EXPECT_EQ(r->remedies[0].kind, "shorter_context");
  EXPECT_EQ(r->remedies[0].value, 4528u);
  EXPECT_EQ(r->remedies[0].flags, "--max-model-len 4528");
  EXPECT_EQ(r->remedies[1].kind, "quantized_kv");
  EXPECT_TRUE(r->remedies[1].fits);
  EXPECT_EQ(r->remedies[1].flags, "--kv-cache-dtype fp8");  // 8.0 GiB of fp8 KV: 23.2 GiB in all
  EXPECT_EQ(r->remedies[2].kind, "mixed_precision_window");
  EXPECT_TRUE(r->remedies[2].fits);
  EXPECT_EQ(r->remedies[3].kind, "cold_tier");
  EXPECT_EQ(r->remedies[3].value, 17179869184u - (24 * kGiB - 16061054976u - 212549632u));
  EXPECT_EQ(r->remedies[4].kind, "fewer_sequences");
  EXPECT_EQ(r->remedies[4].value, 8u);
  EXPECT_EQ(r->remedies[5].kind, "smaller_weights");
  EXPECT_TRUE(r->remedies[5].fits);
  // q8_0 (8.53 GB) + runtime + 16 GiB KV = 25.9 GB > 24 GiB; q6_K (6.59 GB) fits.
  EXPECT_EQ(r->remedies[5].flags, "--weight-type q6_K");
  // One sequence fits: start-up is fine.
  EXPECT_TRUE(check_startup_fits(*r).ok());
}

// A GPTQ checkpoint of the same shape loads its matrices as q8_0 and keeps the embedding and the
// head (2 x 128256 x 4096) in bf16.
TEST(CapacityPlanTest, PrequantizedCheckpointPlansQ8_0Matrices) {
  std::ifstream in(fixture("llama-3-8b.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}};
  auto s = model_shape_from_hf_config(j, "gptq.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->prequantized, "gptq");
  PlanOptions o;
  o.memory_bytes = 24 * kGiB;
  auto r = make_plan(*s, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->weight_type, "q8_0 (from gptq)");
  const uint64_t head = 2ull * 128256 * 4096;
  EXPECT_EQ(r->weights_bytes, (8029995008ull - head) / 32 * 34 + head * 2 + 266240 * 4);
}

TEST(CapacityPlanTest, Qwen2_7B) {
  ModelShape s = load("qwen2-7b.json");
  EXPECT_TRUE(s.attention_bias);
  EXPECT_EQ(s.head_dim, 128u);
  ParamCounts p = count_params(s);
  // Llama layout plus q/k/v biases (3584 + 512 + 512 per layer).
  EXPECT_EQ(p.total, 7615616512u);
  EXPECT_EQ(kv_bytes_per_token(s.kv_geometry(), KvType::kF16, 16), 2.0 * 28 * 4 * 128 * 2);  // 57344
}

TEST(CapacityPlanTest, Mixtral_8x7B) {
  ModelShape s = load("mixtral-8x7b.json");
  EXPECT_EQ(s.num_experts, 8u);
  EXPECT_EQ(s.num_experts_used, 2u);
  EXPECT_EQ(s.moe_ffn, 14336u);
  ParamCounts p = count_params(s);
  // Per layer: attention 41943040, router 4096 x 8, 8 experts x 3 x 4096 x 14336, norms.
  EXPECT_EQ(p.total, 46702792704u);
  EXPECT_EQ(p.active, 12879925248u);
  EXPECT_EQ(kv_bytes_per_token(s.kv_geometry(), KvType::kF16, 16), 131072.0);
  // The router stays f32 under quantization: 32 layers x 8 x 4096 x 4 bytes.
  uint64_t matrices = 46702792704ull - 32 * 8 * 4096 - 65 * 4096;
  EXPECT_EQ(weights_bytes(s, DType::kQ4_0), matrices / 32 * 18 + (32 * 8 * 4096 + 65 * 4096) * 4);
}

TEST(CapacityPlanTest, KimiK2_1T_384Experts) {
  ModelShape s = load("kimi-k2.json");
  EXPECT_TRUE(s.is_mla());
  EXPECT_EQ(s.num_experts, 384u);
  EXPECT_EQ(s.num_experts_used, 8u);
  EXPECT_EQ(s.num_shared_experts, 1u);
  EXPECT_EQ(s.first_k_dense, 1u);
  EXPECT_EQ(s.rope_scaling.type, "yarn");
  EXPECT_EQ(s.rope_scaling.factor, 32.0);
  ParamCounts p = count_params(s);
  // MLA attention per layer 101124096 + norms 14336; 1 dense FFN layer 396361728; 60 MoE layers of
  // 384 experts x 44040192 + 1 shared + router 7168 x 384; embedding and head 163840 x 7168.
  EXPECT_EQ(p.total, 1026408209408u);
  EXPECT_EQ(p.active, 32861477888u);
  EXPECT_EQ(kv_bytes_per_token(s.kv_geometry(), KvType::kF16, 16), 61.0 * (512 + 64) * 2);

  PlanOptions o;
  o.memory_bytes = 640 * kGiB;
  o.max_model_len = 131072;
  auto r = make_plan(s, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->fits);  // 2 TB of bf16 weights
  const Remedy& w = r->remedies.back();
  EXPECT_EQ(w.kind, "smaller_weights");
  EXPECT_TRUE(w.fits);
  // q5_K would be 657 GiB; q4_K is 537 GiB, plus 8.6 GiB of f16 KV for 131072 tokens.
  EXPECT_EQ(w.flags, "--weight-type q4_K");
  EXPECT_EQ(w.value, weights_bytes(s, DType::kQ4_K));
}

TEST(CapacityPlanTest, DeepSeekV3_Mla) {
  ModelShape s = load("deepseek-v3.json");
  EXPECT_TRUE(s.is_mla());
  EXPECT_EQ(s.kv_lora_rank, 512u);
  EXPECT_EQ(s.qk_rope_head_dim, 64u);
  EXPECT_EQ(s.q_lora_rank, 1536u);
  EXPECT_EQ(s.first_k_dense, 3u);
  ParamCounts p = count_params(s);
  EXPECT_EQ(p.total, 671026404352u);  // the published 671B (without the MTP module)
  EXPECT_EQ(p.active, 37552282624u);  // the published 37B activated
  // KV per token is layers x (kv_lora_rank + qk_rope_head_dim) x bytes, not the GQA formula.
  KvGeometry g = s.kv_geometry();
  EXPECT_EQ(kv_bytes_per_token(g, KvType::kF16, 16), 70272.0);
  EXPECT_EQ(kv_bytes_per_token(g, KvType::kF32, 16), 140544.0);
  PlanOptions o;
  o.memory_bytes = 1024 * kGiB;
  o.weight_type = DType::kQ4_K;
  auto r = make_plan(s, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto j = plan_to_json(*r);
  EXPECT_EQ(j["kv_bytes_per_token"]["f16"], 70272);
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token"]["fp8"].get<double>(), 61.0 * (16 * 576 + 4) / 16);
  EXPECT_EQ(j["requested"]["max_model_len"], 163840);
  EXPECT_EQ(j["model"]["mla"]["kv_lora_rank"], 512);
}

TEST(CapacityPlanTest, GgufShapeMatchesItsTensorTable) {
  // The planner's tensor list for a GGUF's shape must add up to the file's real tensors.
  for (const char* name : {"stories260K.gguf", "stories260K-moe4.gguf", "stories260K-qwen2.gguf", "synth-tiny-f16.gguf"}) {
    auto s = load_model_shape(test::model_path(name));
    ASSERT_TRUE(s.ok()) << s.status().message();
    ModelShape formula = *s;
    formula.file_params.reset();
    formula.file_expert_params.reset();
    EXPECT_EQ(count_params(formula).total, *s->file_params) << name;
    EXPECT_EQ(count_params(formula).active, count_params(*s).active) << name;
  }
  auto s = load_model_shape(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->num_layers, 5u);
  EXPECT_EQ(s->num_kv_heads, 4u);
  EXPECT_EQ(s->head_dim, 8u);
  EXPECT_EQ(s->vocab, 512u);
  EXPECT_EQ(s->max_positions, 512u);
  EXPECT_EQ(*s->file_params, 292800u);
  EXPECT_EQ(weights_bytes(*s, DType::kF32), *s->file_weight_bytes);
  // llama.cpp's Q8_0 file: ffn_down (rows of 172) fell back to f16, exactly as the planner assumes.
  auto q8 = load_model_shape(test::model_path("stories260K-q8_0.gguf"));
  ASSERT_TRUE(q8.ok());
  EXPECT_EQ(q8->file_weight_type, "q8_0");
  EXPECT_EQ(weights_bytes(*q8, DType::kQ8_0), *q8->file_weight_bytes);
  auto moe = load_model_shape(test::model_path("stories260K-moe4.gguf"));
  ASSERT_TRUE(moe.ok());
  EXPECT_EQ(moe->num_experts, 4u);
  EXPECT_EQ(moe->num_experts_used, 2u);
  EXPECT_LT(count_params(*moe).active, count_params(*moe).total);
}

TEST(CapacityPlanTest, PlansFromGgufUseTheFileBytes) {
  auto s = load_model_shape(test::model_path("stories260K-q4_0.gguf"));
  ASSERT_TRUE(s.ok());
  PlanOptions o;
  o.memory_bytes = 1 * kGiB;
  auto r = make_plan(*s, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weights_bytes, *s->file_weight_bytes);
  EXPECT_EQ(r->weight_type, "q4_0");
  EXPECT_TRUE(r->fits);
  EXPECT_TRUE(r->remedies.empty());
  EXPECT_EQ(r->requested_context, 512u);
}

TEST(CapacityPlanTest, HfFolderAndErrors) {
  std::string dir = test::make_temp_dir("plan");
  std::filesystem::copy_file(fixture("mixtral-8x7b.json"), dir + "/config.json");
  auto s = load_model_shape(dir);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_experts, 8u);

  auto missing = load_model_shape(dir + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no such file"), std::string::npos);

  auto bad = [&](const std::string& text) {
    std::ofstream(dir + "/config.json", std::ios::trunc) << text;
    auto r = load_model_shape(dir);
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(bad("{not json").find("neither a GGUF file nor valid JSON"), std::string::npos);
  EXPECT_NE(bad(R"({"hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8})").find("num_hidden_layers"),
            std::string::npos);
  EXPECT_NE(bad(R"({"num_hidden_layers": -3, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10})").find("num_hidden_layers"),
            std::string::npos);
  EXPECT_NE(bad(R"({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 10, "intermediate_size": 8})")
                .find("KV heads"),
            std::string::npos);
  EXPECT_NE(bad(R"({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8, "num_local_experts": 4, "num_experts_per_tok": 9})")
                .find("experts"),
            std::string::npos);
  EXPECT_NE(bad(R"({"num_hidden_layers": 2, "hidden_size": 99999999999, "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8})")
                .find("implausibly"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(CapacityPlanTest, HotWindowRowAndOptionErrors) {
  ModelShape s = load("llama-3-8b.json");
  PlanOptions o;
  o.memory_bytes = 24 * kGiB;
  o.kv = KvPrecision{KvType::kF16, 1024, KvType::kInt4};
  auto r = make_plan(s, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->max_context.size(), all_kv_types().size() - 2 + 1);  // int3 / int2 are not usable alone
  EXPECT_EQ(r->max_context.back().kv, "f16 (hot 1024) + int4");
  // With the window, more tokens fit than at f16 alone, fewer than at int4 alone.
  uint64_t mixed = max_tokens_per_seq(s.kv_geometry(), o.kv, 16, 8 * kGiB, 16);
  uint64_t f16 = max_tokens_per_seq(s.kv_geometry(), KvPrecision{KvType::kF16, 0, KvType::kF16}, 16, 8 * kGiB, 16);
  uint64_t int4 = max_tokens_per_seq(s.kv_geometry(), KvPrecision{KvType::kInt4, 0, KvType::kInt4}, 16, 8 * kGiB, 16);
  EXPECT_GT(mixed, f16);
  EXPECT_LT(mixed, int4);
  EXPECT_LE(kv_bytes_for_tokens(s.kv_geometry(), o.kv, 16, mixed), 8 * kGiB / 16);
  EXPECT_GT(kv_bytes_for_tokens(s.kv_geometry(), o.kv, 16, mixed + 16), 8 * kGiB / 16);

  PlanOptions zero = o;
  zero.memory_bytes = 0;
  EXPECT_FALSE(make_plan(s, zero).ok());
  PlanOptions no_seqs = o;
  no_seqs.max_num_seqs = 0;
  EXPECT_NE(make_plan(s, no_seqs).status().message().find("--max-num-seqs"), std::string::npos);
}

TEST(CapacityPlanTest, AbsurdShapesAndRequestsNeverOverflow) {
  nlohmann::json j = nlohmann::json::parse(R"({"num_hidden_layers": 4000, "hidden_size": 1000000, "num_attention_heads": 1000,
      "vocab_size": 1000000, "intermediate_size": 1000000, "num_local_experts": 1000, "num_experts_per_tok": 8})");
  auto s = model_shape_from_hf_config(j, "absurd.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("implausibly many"), std::string::npos) << s.status().message();

  ModelShape llama = load("llama-3-8b.json");
  PlanOptions o;
  o.memory_bytes = UINT64_MAX / 2;
  o.max_num_seqs = 1 << 20;
  o.max_model_len = uint64_t{1} << 32;
  auto r = make_plan(llama, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->fits);  // 2^52 tokens of 128 KiB each: saturates instead of wrapping around
  EXPECT_EQ(r->required_bytes, UINT64_MAX);
}

TEST(CapacityPlanTest, StartupCheckNamesTheShortfall) {
  ModelShape s = load("llama-3-8b.json");
  PlanOptions o;
  o.memory_bytes = 8 * kGiB;  // bf16 weights alone are 15 GiB
  auto r = make_plan(s, o);
  ASSERT_TRUE(r.ok());
  Status st = check_startup_fits(*r);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("does not fit"), std::string::npos);
  EXPECT_NE(st.message().find("--weight-type q6_K"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace hz

namespace hz {
namespace {

// Compact KV types write through f16 staging copies (KvCache); the plan's runtime overhead counts
// them so that RSS stays within the plan (measured in tests/e2e/depth_128k_slow_test.cc).
TEST(CapacityPlanTest, KvStagingCountsExactBlocksOfWindowAndChunk) {
  KvGeometry g;
  g.num_layers = 2;
  g.num_heads = 2;
  g.head_dim = 32;
  const uint64_t f16_block = 2 * 2 * 2 * 16 * 32 * 2;  // layers x K/V x heads x tokens x dims x 2 B
  KvPrecision f16{KvType::kF16, 0, KvType::kF16};
  EXPECT_EQ(kv_staging_bytes(g, f16, 16, 512, 4), 0u);  // written in place, never staged
  KvPrecision int8{KvType::kInt8, 0, KvType::kInt8};
  // One sequence: its current block, plus a 512-token chunk's 32 blocks and one unaligned.
  EXPECT_EQ(kv_staging_bytes(g, int8, 16, 512, 1), (1 + 33) * f16_block);
  EXPECT_EQ(kv_staging_bytes(g, int8, 16, 512, 3), (3 + 33) * f16_block);
  // f16 hot window of 64 over int4: 4 window blocks + 1 per sequence, the chunk's 33, and the
  // arena's int4 copy of the window while the KV figure counts it at f16 (hot - cold subtracted).
  KvPrecision mixed{KvType::kF16, 64, KvType::kInt4};
  const uint64_t int4_64 = kv_bytes_for_tokens(g, KvType::kInt4, 16, 64);
  const uint64_t f16_64 = kv_bytes_for_tokens(g, KvType::kF16, 16, 64);
  ASSERT_EQ(f16_64, 4 * f16_block);
  ASSERT_LT(int4_64, f16_64);
  EXPECT_EQ(kv_staging_bytes(g, mixed, 16, 512, 1), (5 + 33) * f16_block - (f16_64 - int4_64));
  // In the plan: part of the runtime overhead, zero for the default f16.
  ModelShape s;
  s.num_layers = 2;
  s.hidden = 128;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 32;
  s.ffn = 384;
  s.vocab = 512;
  PlanOptions o;
  o.memory_bytes = uint64_t{1} << 30;
  o.max_model_len = 4096;
  o.kv = int8;
  auto r = make_plan(s, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->overhead.kv_staging, (1 + 33) * f16_block);
  o.kv = f16;
  auto plain = make_plan(s, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->overhead.kv_staging, 0u);
  EXPECT_EQ(r->overhead.total() - r->overhead.kv_staging, plain->overhead.total());
}

}  // namespace
}  // namespace hz
