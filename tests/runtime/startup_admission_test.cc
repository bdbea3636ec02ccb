// Start-up admission: it fits, it does not (an error naming the flags), or the model's shape cannot
// be read and the check is skipped as an explicit decision (never silently).
#include "runtime/startup_admission.h"

#include <gtest/gtest.h>

namespace hz {
namespace {

ModelShape tiny_shape() {
  ModelShape s;
  s.architecture = "llama";
  s.source = "tiny.gguf";
  s.num_layers = 2;
  s.hidden = 64;
  s.num_heads = 2;
  s.num_kv_heads = 2;
  s.head_dim = 32;
  s.ffn = 128;
  s.vocab = 256;
  s.max_positions = 256;
  return s;
}

KvPlan kv_plan(uint64_t budget) {
  KvPlan p;
  p.block_tokens = 16;
  p.budget_bytes = budget;
  return p;
}

StartupDemand demand(uint64_t ram) {
  StartupDemand d;
  d.available_ram_bytes = ram;
  d.max_num_seqs = 1;
  d.max_model_len = 256;
  d.prefill_chunk = 64;
  return d;
}

TEST(StartupAdmissionTest, UnreadableShapeIsAnExplicitSkippedDecision) {
  const Result<ModelShape> shape = invalid_argument("model.bin: not a GGUF file");
  auto a = admit_at_startup(shape, kv_plan(1 << 20), demand(uint64_t{1} << 40));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_FALSE(a->checked);
  EXPECT_NE(a->skipped_reason.find("model.bin: not a GGUF file"), std::string::npos);
}

TEST(StartupAdmissionTest, ChecksWhatFitsAndRefusesWhatDoesNot) {
  auto a = admit_at_startup(tiny_shape(), kv_plan(1 << 20), demand(uint64_t{64} << 30));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->checked);
  EXPECT_TRUE(a->skipped_reason.empty());
  // A KV budget beyond the memory available is refused, naming the flag to lower.
  a = admit_at_startup(tiny_shape(), kv_plan(uint64_t{128} << 30), demand(uint64_t{64} << 30));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--kv-budget"), std::string::npos);
}

}  // namespace
}  // namespace hz
