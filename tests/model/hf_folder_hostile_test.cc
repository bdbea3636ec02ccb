// Hostile Hugging Face model folders: deeply nested JSON and sizes that disagree with the tensors
// are refused with an error naming the file, without a crash and without allocating for the
// claimed sizes (peak RSS measured in a forked child).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "format/hf_tokenizer_json.h"
#include "format/json_limits.h"
#include "model/hf_folder.h"
#include "model/model_shape.h"
#include "support/forked_run.h"
#include "support/hf_folder_writer.h"
#include "support/test_support.h"

namespace hz {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kDeep = 50000;
// Peak memory a refused folder may cost beyond the baseline child (which has the same parent image).
constexpr uint64_t kMaxExtraRss = 64ull << 20;

std::string read_text(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& p, const std::string& text) { std::ofstream(p) << text; }

// A valid folder from stories260K.gguf, written once per test binary and removed at exit.
const std::string& base_folder() {
  struct Folder {
    Folder() : dir(test::make_temp_dir("hostile_base")) {
      Status s = test::write_hf_folder(test::model_path("stories260K.gguf"), dir);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    ~Folder() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
    std::string dir;
  };
  static const Folder folder;
  return folder.dir;
}

std::string copy_folder(const std::string& name) {
  std::string d = test::make_temp_dir(name);
  fs::copy(base_folder(), d, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return d;
}

// `value` nested in `levels` arrays: "[[[...value...]]]".
std::string nested_arrays(int levels, const std::string& value) {
  return std::string(levels, '[') + value + std::string(levels, ']');
}

// Opens the folder in a forked child: exit 0 when refused with an error containing `needle`.
test::ChildRun open_in_child(const std::string& dir, const std::string& needle) {
  return test::run_in_child([&] {
    auto f = HfFolder::open(dir);
    if (f.ok()) return 2;
    std::fprintf(stderr, "refused: %s\n", f.status().message().substr(0, 300).c_str());
    return f.status().message().find(needle) != std::string::npos ? 0 : 3;
  });
}

uint64_t baseline_rss() {
  static const uint64_t rss = test::run_in_child([] { return 0; }).peak_rss;
  return rss;
}

TEST(HfFolderHostileTest, BaseFolderOpens) {
  auto f = HfFolder::open(base_folder());
  ASSERT_TRUE(f.ok()) << f.status().message();
}

TEST(HfFolderHostileTest, DeeplyNestedTokenizerJsonRefused) {
  std::string dir = copy_folder("hostile_tok_deep");
  json tok = json::parse(read_text(dir + "/tokenizer.json"));
  // 50,000 levels of pre_tokenizer Sequences, the shape that used to overflow the stack.
  std::string seq;
  for (int i = 0; i < kDeep; ++i) seq += R"({"type":"Sequence","pretokenizers":[)";
  seq += R"({"type":"ByteLevel"})";
  for (int i = 0; i < kDeep; ++i) seq += "]}";
  tok["pre_tokenizer"] = "@DEEP@";
  std::string text = tok.dump();
  const size_t at = text.find("\"@DEEP@\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, seq);
  write_text(dir + "/tokenizer.json", text);
  test::ChildRun r = open_in_child(dir, "tokenizer.json: JSON nests deeper than 64 levels");
  EXPECT_EQ(r.exit_code, 0);
  fs::remove_all(dir);
}

TEST(HfFolderHostileTest, DeeplyNestedConfigJsonRefused) {
  std::string dir = copy_folder("hostile_cfg_deep");
  std::string text = read_text(dir + "/config.json");
  ASSERT_NE(text.rfind('}'), std::string::npos);
  text.insert(text.rfind('}'), ",\"rope_scaling\":" + nested_arrays(kDeep, "1"));
  write_text(dir + "/config.json", text);
  test::ChildRun r = open_in_child(dir, "config.json: JSON nests deeper than 64 levels");
  EXPECT_EQ(r.exit_code, 0);
  // The planner reads config.json on its own path.
  auto shape = load_model_shape(dir + "/config.json");
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("nests deeper"), std::string::npos) << shape.status().message();
  fs::remove_all(dir);
}

// The walk over Sequences is bounded on its own, for JSON that did not come from a file.
TEST(HfFolderHostileTest, SequenceWalkIsBoundedForInMemoryJson) {
  json tok = json::parse(read_text(base_folder() + "/tokenizer.json"));
  json node = {{"type", "ByteLevel"}};
  for (int i = 0; i < kDeep; ++i) {
    json outer = {{"type", "Sequence"}};
    outer["pretokenizers"] = json::array();
    outer["pretokenizers"].push_back(std::move(node));
    node = std::move(outer);
  }
  tok["pre_tokenizer"] = std::move(node);
  HfTokenizerFiles files;
  files.tokenizer = &tok;
  auto r = hf_tokenizer_to_gguf(files);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'pretokenizers' Sequences nest deeper than 16 levels"), std::string::npos)
      << r.status().message();
}

TEST(HfFolderHostileTest, NestingScanReportsOffset) {
  JsonNesting n = json_nesting(R"({"a":"[[[[","b":[[1]]})", 2);
  EXPECT_EQ(n.max_depth, 3u);
  EXPECT_EQ(n.exceeded_at, 17u);
  EXPECT_EQ(json_nesting(R"({"a":"\"[[[["})", 1).exceeded_at, std::string_view::npos);
}

TEST(HfFolderHostileTest, HugeTokenIdRefusedWithoutAllocating) {
  std::string dir = copy_folder("hostile_tok_id");
  json tok = json::parse(read_text(dir + "/tokenizer.json"));
  tok["added_tokens"].push_back({{"id", (1 << 24) - 1}, {"content", "<huge>"}, {"special", true}});
  write_text(dir + "/tokenizer.json", tok.dump());
  test::ChildRun r = open_in_child(dir, "added_tokens");
  EXPECT_EQ(r.exit_code, 0);
  const uint64_t base = baseline_rss();
  std::printf("huge token id: refused in %.3f s, peak RSS %.1f MB (baseline child %.1f MB)\n", r.seconds,
              r.peak_rss / 1048576.0, base / 1048576.0);
  EXPECT_LT(r.peak_rss, base + kMaxExtraRss);
  fs::remove_all(dir);
}

TEST(HfFolderHostileTest, HugeVocabSizeRefusedWithoutAllocating) {
  std::string dir = copy_folder("hostile_vocab");
  json cfg = json::parse(read_text(dir + "/config.json"));
  cfg["vocab_size"] = 16777216;
  write_text(dir + "/config.json", cfg.dump());
  test::ChildRun r = open_in_child(dir, "vocab_size 16777216");
  EXPECT_EQ(r.exit_code, 0);
  const uint64_t base = baseline_rss();
  std::printf("vocab_size 2^24: refused in %.3f s, peak RSS %.1f MB (baseline child %.1f MB)\n", r.seconds,
              r.peak_rss / 1048576.0, base / 1048576.0);
  EXPECT_LT(r.peak_rss, base + kMaxExtraRss);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hz
