// `horizon quantize`: GGUF -> GGUF (Q8_0 bytes identical to llama.cpp's), Hugging Face folder ->
// GGUF (llama metadata, tokenizer, Q/K rows permuted back: the F32 output equals the original GGUF
// tensor for tensor), outputs that load and run, and clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/thread_pool.h"
#include "format/gguf.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/golden.h"
#include "support/hf_folder_writer.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace hz {
namespace {

std::string bin() { return HORIZON_BINARY; }

TEST(QuantizeCliTest, Q8_0MatchesLlamaCppBytes) {
  std::string dir = test::make_temp_dir("qcli");
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + " quantize " + test::model_path("synth-tiny-f16.gguf") + " " + dir + "/q8.gguf --type q8_0", &out, &err), 0)
      << err;
  EXPECT_NE(err.find("wrote"), std::string::npos) << err;
  auto ours = GgufFile::open(dir + "/q8.gguf");
  auto theirs = GgufFile::open(test::model_path("synth-tiny-q8_0.gguf"));
  ASSERT_TRUE(ours.ok() && theirs.ok());
  ASSERT_EQ(ours->tensors().size(), theirs->tensors().size());
  for (const auto& t : theirs->tensors()) {
    const TensorInfo* o = ours->get_tensor(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    EXPECT_EQ(o->dtype, t.dtype) << t.name;
    ASSERT_EQ(o->num_bytes, t.num_bytes) << t.name;
    EXPECT_EQ(std::memcmp(o->data, t.data, t.num_bytes), 0) << t.name;
  }
  std::filesystem::remove_all(dir);
}

TEST(QuantizeCliTest, HfFolderToGgufRoundTripsAndRuns) {
  std::string dir = test::make_temp_dir("qhf");
  ASSERT_TRUE(test::write_hf_folder(test::model_path("stories260K.gguf"), dir + "/hf", {.num_shards = 2}).ok());
  std::string out, err;
  // The folder itself runs with -m DIR: the README's greedy story.
  ASSERT_EQ(test::run_command(bin() + " run -m " + dir + "/hf -p 'Once upon a time' -n 16 --temp 0", &out, &err), 0) << err;
  EXPECT_EQ(out.rfind(", there was a little girl named Lily", 0), 0u) << out;
  ASSERT_EQ(test::run_command(bin() + " quantize " + dir + "/hf " + dir + "/f32.gguf --type f32", &out, &err), 0) << err;
  auto ours = GgufFile::open(dir + "/f32.gguf");
  auto orig = GgufFile::open(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(ours.ok()) << ours.status().message();
  ASSERT_TRUE(orig.ok());
  EXPECT_EQ(*ours->get_string_or("general.architecture", ""), "llama");
  EXPECT_EQ(*ours->get_uint_or("llama.block_count", 0), 5u);
  EXPECT_EQ(*ours->get_uint_or("llama.attention.head_count_kv", 0), 4u);
  // Every tensor, Q/K included (permuted back), equals the original.
  ASSERT_EQ(ours->tensors().size(), orig->tensors().size());
  for (const auto& t : orig->tensors()) {
    const TensorInfo* o = ours->get_tensor(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    EXPECT_EQ(o->dims, t.dims) << t.name;
    ASSERT_EQ(o->num_bytes, t.num_bytes) << t.name;
    EXPECT_EQ(std::memcmp(o->data, t.data, t.num_bytes), 0) << t.name;
  }
  // The tokenizer from tokenizer.json encodes like the original.
  auto a = Tokenizer::from_gguf(*ours);
  auto b = Tokenizer::from_gguf(*orig);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*a)->encode("Once upon a time, Lily saw a cat."), (*b)->encode("Once upon a time, Lily saw a cat."));

  // Quantized output from the folder loads and runs: greedy story from the README.
  ASSERT_EQ(test::run_command(bin() + " quantize " + dir + "/hf " + dir + "/q8.gguf --type q8_0 --keep-embeddings f16 --keep-output q8_0", &out, &err), 0)
      << err;
  auto q = GgufFile::open(dir + "/q8.gguf");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->get_tensor("token_embd.weight")->dtype, DType::kF16);
  EXPECT_EQ(q->get_tensor("blk.0.attn_q.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(q->get_tensor("blk.0.ffn_down.weight")->dtype, DType::kF16);  // 172 columns: fallback
  ASSERT_EQ(test::run_command(bin() + " run -m " + dir + "/q8.gguf -p 'Once upon a time' -n 8 --temp 0", &out, &err), 0) << err;
  EXPECT_EQ(out.rfind(", there was a little girl", 0), 0u) << out;
  std::filesystem::remove_all(dir);
}

// K-quant output of a k-quant model (re-encoded through f32) loads and stays within the golden
// tolerance of llama.cpp's logits for that model.
TEST(QuantizeCliTest, KQuantOutputRunsWithinGoldenTolerance) {
  std::string dir = test::make_temp_dir("qk");
  for (const char* type : {"q6_k", "q4_k"}) {
    SCOPED_TRACE(type);
    std::string out, err;
    const std::string path = dir + "/" + type + ".gguf";
    ASSERT_EQ(test::run_command(bin() + " quantize " + test::model_path("synth-small-q6_k.gguf") + " " + path + " --type " + type, &out, &err), 0)
        << err;
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->get_tensor("blk.0.attn_q.weight")->dtype, std::string(type) == "q6_k" ? DType::kQ6_K : DType::kQ4_K);
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ThreadPool pool(2);
    test::GoldenFile g = test::load_golden("synth-small-q6_k.json");
    float max_diff = 0;
    for (const auto& c : g.cases) {
      SingleSequence seq(**m, pool, {.max_tokens = 512});
      const std::vector<float>& logits = seq.append(c.prompt_ids);
      ASSERT_EQ(logits.size(), c.prompt_last_logits.size());
      for (size_t i = 0; i < logits.size(); ++i) max_diff = std::max(max_diff, std::fabs(logits[i] - c.prompt_last_logits[i]));
    }
    RecordProperty(std::string("max_abs_diff_") + type, std::to_string(max_diff));
    // Q6_K: the golden test's own tolerance. Q4_K (every matrix 4-bit): llama.cpp's Q4_K_M of the
    // same weights is 1.46 away from these logits, so 2.5 bounds "4-bit noise", not a broken layout
    // (a wrong bit layout gives logits of unrelated magnitude).
    EXPECT_LE(max_diff, std::string(type) == "q6_k" ? 0.25f : 2.5f);
  }
  std::filesystem::remove_all(dir);
}

TEST(QuantizeCliTest, BadInputsGiveOneClearError) {
  std::string dir = test::make_temp_dir("qbad");
  const std::string m = test::model_path("stories260K.gguf");
  struct Case {
    std::string args, expect;
  } cases[] = {
      {"quantize " + m + " " + dir + "/o.gguf --type q3_x", "--type 'q3_x' is not a type"},
      {"quantize " + m + " " + dir + "/o.gguf --type q2_k", "--type 'q2_k' is not written by horizon"},
      {"quantize " + m + " " + dir + "/o.gguf --keep-output q5_0", "--keep-output 'q5_0'"},
      {"quantize /nonexistent.gguf " + dir + "/o.gguf", "nonexistent"},
      {"quantize " + m + " " + m, "overwrite the input"},
      {"quantize " + dir + " " + dir + "/o.gguf", dir},
      {"quantize " + m + " /nonexistent-dir/o.gguf", "/nonexistent-dir/o.gguf"},
  };
  for (const auto& c : cases) {
    std::string out, err;
    EXPECT_EQ(test::run_command(bin() + " " + c.args, &out, &err), 1) << c.args;
    EXPECT_EQ(err.rfind("error: ", 0), 0u) << c.args << ": " << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.args << ": " << err;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hz
