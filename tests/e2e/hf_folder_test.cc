// Hugging Face folders written from stories260K.gguf (Q/K un-permuted to rotate-half order, a
// tokenizer.json built from the GGUF vocabulary) load with Model::load(dir) and reproduce the
// golden outputs; the tokenizer.json tokenizer encodes like the GGUF one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "base/thread_pool.h"
#include "format/gguf.h"
#include "model/hf_folder.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/golden.h"
#include "support/hf_folder_writer.h"
#include "support/server_process.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace hz {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const std::string& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

std::string write_folder(const std::string& prefix, const test::HfWriteOptions& opts) {
  std::string dir = test::make_temp_dir(prefix);
  Status s = test::write_hf_folder(test::model_path("stories260K.gguf"), dir, opts);
  EXPECT_TRUE(s.ok()) << s.message();
  return dir;
}

// Greedy decoding reproduces every golden id; top-5 probabilities within `tol`.
void check_golden(const std::string& dir, float tol) {
  auto m = Model::load(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  Model& model = **m;
  EXPECT_EQ(model.config().rope.layout, RopeLayout::kNeox);
  ThreadPool pool(2);
  test::GoldenFile g = test::load_golden("stories260K.json");
  const int vocab = model.config().vocab;
  for (const auto& c : g.cases) {
    SCOPED_TRACE(c.prompt);
    SingleSequence seq(model, pool, {.max_tokens = 512, .block_tokens = 16, .kv_dtype = DType::kF32});
    std::vector<float> logits = seq.append(c.prompt_ids);
    for (size_t step = 0; step < c.output_ids.size(); ++step) {
      int32_t tok = test::argmax(logits.data(), vocab);
      ASSERT_EQ(tok, c.output_ids[step]) << "step " << step;
      auto p = test::softmax_probs(logits.data(), vocab);
      for (const auto& [id, prob] : c.top5[step]) EXPECT_NEAR(p[id], prob, tol) << "step " << step << " token " << id;
      logits = seq.append({tok});
    }
  }
}

TEST(HfFolderTest, SingleFileFolderPassesGolden) {
  std::string dir = write_folder("hf1", {});
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  check_golden(dir, 3e-3f);
  fs::remove_all(dir);
}

TEST(HfFolderTest, ShardedFolderPassesGolden) {
  std::string dir = write_folder("hf2", {.num_shards = 2});
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir + "/model-00001-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/model-00002-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
  check_golden(dir, 3e-3f);
  fs::remove_all(dir);
}

// Un-permuting the rows is what makes the NeoX rotation right: the HF Q rows differ from the
// GGUF ones (so the golden pass above is not vacuous).
TEST(HfFolderTest, QkRowsAreInRotateHalfOrder) {
  std::string dir = write_folder("hfperm", {});
  auto hf = HfFolder::open(dir);
  ASSERT_TRUE(hf.ok()) << hf.status().message();
  auto gguf = GgufFile::open(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(gguf.ok());
  const TensorInfo* a = hf->tensors->get_tensor("blk.0.attn_q.weight");
  const TensorInfo* b = gguf->get_tensor("blk.0.attn_q.weight");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->dims, b->dims);
  ASSERT_EQ(a->num_bytes, b->num_bytes);
  EXPECT_NE(std::memcmp(a->data, b->data, a->num_bytes), 0);
  // Row 1 of head 0 in GGUF order is row head_dim/2 in HF order.
  const uint64_t row = a->dims[0] * sizeof(float);
  const int hd = hf->config.head_dim;
  EXPECT_EQ(std::memcmp(a->data + (hd / 2) * row, b->data + 1 * row, row), 0);
  // V is not permuted.
  const TensorInfo* va = hf->tensors->get_tensor("blk.0.attn_v.weight");
  const TensorInfo* vb = gguf->get_tensor("blk.0.attn_v.weight");
  EXPECT_EQ(std::memcmp(va->data, vb->data, va->num_bytes), 0);
  fs::remove_all(dir);
}

TEST(HfFolderTest, F16FolderRunsCloseToGolden) {
  std::string dir = write_folder("hf16", {.dtype = "BF16"});
  auto m = Model::load(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->weights().layers[0].wq.dtype, DType::kBF16);
  ThreadPool pool(1);
  test::GoldenFile g = test::load_golden("stories260K.json");
  SingleSequence seq(**m, pool, {.max_tokens = 512});
  std::vector<float> logits = seq.append(g.cases[0].prompt_ids);
  auto p = test::softmax_probs(logits.data(), (*m)->config().vocab);
  for (const auto& [id, prob] : g.cases[0].top5[0]) EXPECT_NEAR(p[id], prob, 0.05f);
  fs::remove_all(dir);
}

TEST(HfFolderTest, TokenizerJsonEncodesGoldenPrompts) {
  std::string dir = write_folder("hftok", {});
  auto tok = Tokenizer::from_hf(read_json(dir + "/tokenizer.json"), read_json(dir + "/tokenizer_config.json"));
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  test::GoldenFile g = test::load_golden("stories260K.json");
  for (const auto& c : g.cases) EXPECT_EQ((*tok)->encode(c.prompt, true, false), c.prompt_ids) << c.prompt;

  // And like the GGUF tokenizer on text it was not built for (byte fallback, spaces, specials).
  auto f = GgufFile::open(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(f.ok());
  auto ref = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(ref.ok());
  for (const std::string text : {"Hello world", "  two  spaces", "caf\xC3\xA9 \xE2\x82\xAC 100 \xF0\x9F\x98\x80", "<s>x</s>",
                                 "\n\nnew\tlines", "The little girl named Lily saw a big, red ball."}) {
    EXPECT_EQ((*tok)->encode(text, true, true), (*ref)->encode(text, true, true)) << text;
    EXPECT_EQ((*tok)->decode((*tok)->encode(text, false, false)), text);
  }
  EXPECT_EQ((*tok)->bos_id(), (*ref)->bos_id());
  EXPECT_EQ((*tok)->eos_id(), (*ref)->eos_id());
  EXPECT_EQ((*tok)->vocab_size(), (*ref)->vocab_size());
  fs::remove_all(dir);
}

TEST(HfFolderTest, MetadataImageCarriesTokenizerAndSampling) {
  std::string dir = write_folder("hfmeta", {});
  auto m = Model::load(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const GgufFile& meta = (*m)->file();
  EXPECT_EQ(*meta.get_string_or("general.architecture", ""), "llama");
  EXPECT_EQ(*meta.get_string_or("tokenizer.ggml.model", ""), "llama");
  EXPECT_NEAR(*meta.get_float_or("general.sampling.temp", 0), 0.7, 1e-6);
  EXPECT_TRUE(meta.tensors().empty());
  auto tok = Tokenizer::from_gguf(meta);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->vocab_size(), 512);
  fs::remove_all(dir);
}

// `serve` on a folder gives requests the sampling defaults of its generation_config.json (vLLM's
// --generation-config auto), shown in /props and the start-up summary; `vllm` keeps OpenAI's.
TEST(HfFolderTest, ServingTakesTheSamplingDefaultsOfGenerationConfig) {
  std::string dir = write_folder("hfgen", {});
  const nlohmann::json gen = {{"do_sample", true}, {"temperature", 0.6}, {"top_p", 0.95}, {"top_k", 20},
                              {"min_p", 0.05}, {"repetition_penalty", 1.1}};
  std::ofstream(fs::path(dir) / "generation_config.json") << gen.dump();
  auto params = [](const test::ServerProcess& srv) {
    std::string body;
    EXPECT_EQ(test::http_request("GET", srv.base_url() + "/props", "", &body), 200) << body;
    return nlohmann::json::parse(body)["default_generation_settings"]["params"];
  };
  {
    test::ServerProcess srv({"-m", dir, "--threads", "1"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const nlohmann::json p = params(srv);
    EXPECT_NEAR(p["temperature"].get<double>(), 0.6, 1e-6);
    EXPECT_NEAR(p["top_p"].get<double>(), 0.95, 1e-6);
    EXPECT_EQ(p["top_k"], 20);
    EXPECT_NEAR(p["min_p"].get<double>(), 0.05, 1e-6);
    EXPECT_NEAR(p["repeat_penalty"].get<double>(), 1.1, 1e-6);
    EXPECT_NE(srv.log().find("temperature 0.6, top_p 0.95, min_p 0.05, repetition_penalty 1.1, top_k 20"),
              std::string::npos)
        << srv.log();
  }
  {
    test::ServerProcess srv({"-m", dir, "--threads", "1", "--generation-config", "vllm"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const nlohmann::json p = params(srv);
    EXPECT_EQ(p["temperature"], 1.0);
    EXPECT_EQ(p["top_p"], 1.0);
    EXPECT_EQ(p["top_k"], 0);
    EXPECT_EQ(p["repeat_penalty"], 1.0);
    EXPECT_EQ(srv.log().find("the model's defaults"), std::string::npos) << srv.log();
  }
  fs::remove_all(dir);
}

// `run` takes the model's sampling defaults for the flags not given (llama-cli's way): a folder
// whose generation_config.json says do_sample false runs greedy at any seed; a flag given wins.
TEST(HfFolderTest, RunTakesTheModelsSamplingDefaultsForFlagsNotGiven) {
  std::string dir = write_folder("hfrun", {});
  auto run = [&](const std::string& extra) {
    std::string out, err;
    EXPECT_EQ(test::run_command(std::string(HORIZON_BINARY) + " run -m " + dir + " -p 'Once upon a time' -n 24 -t 1 " + extra,
                                &out, &err),
              0)
        << err;
    return out;
  };
  std::ofstream(fs::path(dir) / "generation_config.json") << R"({"do_sample": false})";
  const std::string greedy = run("--temp 0");
  ASSERT_FALSE(greedy.empty());
  EXPECT_EQ(run("-s 1"), greedy);
  EXPECT_EQ(run("-s 2"), greedy);
  std::ofstream(fs::path(dir) / "generation_config.json") << R"({"temperature": 1.5, "top_k": 0, "top_p": 1.0})";
  EXPECT_EQ(run("--temp 0 -s 3"), greedy);
  EXPECT_NE(run("-s 3"), greedy);  // sampled at the model's 1.5
  fs::remove_all(dir);
}

// Broken folders: each refused with an error naming the file at fault.
TEST(HfFolderTest, BrokenFoldersRefused) {
  auto expect_load_error = [](const std::string& dir, const std::string& fragment) {
    auto m = Model::load(dir);
    ASSERT_FALSE(m.ok()) << "loaded; expected an error with: " << fragment;
    EXPECT_NE(m.status().message().find(fragment), std::string::npos) << m.status().message();
  };
  std::string dir = write_folder("hfbad", {.num_shards = 2});
  // A missing shard.
  fs::rename(dir + "/model-00002-of-00002.safetensors", dir + "/moved");
  expect_load_error(dir, "model-00002-of-00002.safetensors");
  fs::rename(dir + "/moved", dir + "/model-00002-of-00002.safetensors");
  // An index that points out of the folder.
  auto index = read_json(dir + "/model.safetensors.index.json");
  index["weight_map"]["lm_head.weight"] = "../evil.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  expect_load_error(dir, "not a plain file name");
  // An index naming the wrong shard for a tensor.
  index["weight_map"]["lm_head.weight"] = "model-00002-of-00002.safetensors";
  const std::string where = index["weight_map"]["model.norm.weight"];
  index["weight_map"]["model.norm.weight"] =
      where == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  expect_load_error(dir, "does not hold it");
  fs::remove_all(dir);

  dir = write_folder("hfbad2", {});
  // Unsupported model_type; bad JSON; a missing tokenizer.json.
  auto config = read_json(dir + "/config.json");
  config["model_type"] = "gpt_neox";
  std::ofstream(dir + "/config.json") << config.dump();
  expect_load_error(dir, "model_type 'gpt_neox' is not supported");
  std::ofstream(dir + "/config.json") << "{ not json";
  expect_load_error(dir, "config.json: not valid JSON");
  config["model_type"] = "llama";
  config["hidden_size"] = "64";
  std::ofstream(dir + "/config.json") << config.dump();
  expect_load_error(dir, "field 'hidden_size' must be an integer");
  config["hidden_size"] = 64;
  config["num_hidden_layers"] = 6;  // one more than the folder has
  std::ofstream(dir + "/config.json") << config.dump();
  expect_load_error(dir, "blk.5.attn_norm.weight");
  config["num_hidden_layers"] = 5;
  std::ofstream(dir + "/config.json") << config.dump();
  fs::remove(dir + "/tokenizer.json");
  expect_load_error(dir, "tokenizer.json: missing");
  fs::remove_all(dir);
}

TEST(HfFolderTest, NameMap) {
  EXPECT_EQ(gguf_name_for_hf("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(gguf_name_for_hf("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_name_for_hf("model.norm.weight"), "output_norm.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.12.self_attn.q_proj.weight"), "blk.12.attn_q.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.0.self_attn.k_proj.bias"), "blk.0.attn_k.bias");
  EXPECT_EQ(gguf_name_for_hf("model.layers.3.mlp.down_proj.weight"), "blk.3.ffn_down.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.3.post_attention_layernorm.weight"), "blk.3.ffn_norm.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.0.self_attn.rotary_emb.inv_freq"), std::nullopt);
  EXPECT_EQ(gguf_name_for_hf("model.layers.x.mlp.up_proj.weight"), std::nullopt);
  EXPECT_EQ(gguf_name_for_hf("model.layers.01.mlp.up_proj.weight"), std::nullopt);
}

}  // namespace
}  // namespace hz
