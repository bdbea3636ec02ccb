// ChatTemplate against the independent reference renderer @huggingface/jinja: published chat
// templates (Llama 3/3.1, Mistral, Qwen2/2.5/3, Gemma, DeepSeek) over several conversations, and
// language cases. Expected strings come from tests/chat/render_jinja.mjs (expected.json).
#include "chat/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "support/test_support.h"

namespace hz {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

std::string fixture_dir() { return std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/chat_templates"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json read_json(const std::string& path) { return Json::parse(read_file(path)); }

TEST(ChatTemplateTest, PublishedTemplatesMatchReferenceRenderer) {
  Json cases = read_json(fixture_dir() + "/cases.json");
  Json expected = read_json(fixture_dir() + "/expected.json");
  std::map<std::string, Json> conversations;
  for (const Json& c : cases["conversations"]) conversations[c["name"].get<std::string>()] = c;
  std::map<std::string, ChatTemplate> templates;
  std::map<std::string, int> outputs_per_template;
  int num_checked = 0;
  for (const Json& e : expected["templates"]) {
    std::string file = e["template"];
    std::string conv_name = e["conversation"];
    bool agp = e["add_generation_prompt"];
    SCOPED_TRACE(file + " / " + conv_name + (agp ? " / add_generation_prompt" : ""));
    if (!templates.count(file)) {
      auto t = ChatTemplate::parse(read_file(fixture_dir() + "/" + file));
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      templates.emplace(file, *t);
    }
    const Json& conv = conversations.at(conv_name);
    auto r = templates.at(file).render(conv["messages"], agp, conv.value("extra", Json::object()));
    if (e.contains("output")) {
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(*r, e["output"].get<std::string>());
      ++outputs_per_template[file];
    } else {
      EXPECT_FALSE(r.ok()) << "reference renderer failed with: " << e["error"];
      // raise_exception messages must come through verbatim.
      std::string ref_error = e["error"];
      if (!r.ok() && templates.at(file).source().find(ref_error) != std::string::npos) {
        EXPECT_THAT(r.status().message(), HasSubstr(ref_error));
      }
    }
    ++num_checked;
  }
  EXPECT_GE(num_checked, 150);
  // Every template family of the issue renders real output, not just errors.
  for (const char* family : {"Llama-3-8B", "Llama-3.1", "Mistral-7B", "Mistral-Nemo", "Qwen2-", "Qwen2.5",
                             "gemma-2", "gemma-7b", "DeepSeek-V2", "DeepSeek-V3", "DeepSeek-R1"}) {
    int n = 0;
    for (const auto& [file, count] : outputs_per_template)
      if (file.find(family) != std::string::npos) n += count;
    EXPECT_GE(n, 4) << family;
  }
}

TEST(ChatTemplateTest, LanguageCasesMatchReferenceRenderer) {
  Json expected = read_json(fixture_dir() + "/expected.json");
  Json cases = read_json(fixture_dir() + "/cases.json");
  ASSERT_EQ(expected["inline"].size(), cases["inline"].size());
  for (size_t i = 0; i < cases["inline"].size(); ++i) {
    const Json& c = cases["inline"][i];
    const Json& e = expected["inline"][i];
    SCOPED_TRACE(c["name"].get<std::string>() + ": " + c["template"].get<std::string>());
    auto t = ChatTemplate::parse(c["template"]);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    Json vars = c.value("vars", Json::object());
    auto r = t->render(vars.value("messages", Json::array()), false, vars);
    if (e.contains("output")) {
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(*r, e["output"].get<std::string>());
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_THAT(r.status().message(), HasSubstr(e["error"].get<std::string>()));
    }
  }
}

// expected.json must be exactly what the pinned reference renderer produces today.
TEST(ChatTemplateTest, ExpectedFileComesFromReferenceRenderer) {
  std::string src = HORIZON_SOURCE_DIR;
  if (test::run_command("node --version") != 0 ||
      !std::filesystem::exists(src + "/tests/npm/node_modules/@huggingface/jinja/package.json"))
    GTEST_SKIP() << "node or tests/npm/node_modules missing (npm ci in tests/npm)";
  std::string out, err;
  int rc = test::run_command("node " + src + "/tests/chat/render_jinja.mjs " + fixture_dir() + "/cases.json",
                             &out, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(Json::parse(out), read_json(fixture_dir() + "/expected.json"))
      << "regenerate: node tests/chat/render_jinja.mjs tests/fixtures/chat_templates/cases.json "
         "> tests/fixtures/chat_templates/expected.json";
}

TEST(ChatTemplateTest, RejectsBadInputs) {
  auto t = ChatTemplate::parse("{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  auto r = t->render(nlohmann::json::object(), false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("messages must be a JSON array"));
  r = t->render(nlohmann::json::array(), false, nlohmann::json::array());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("extra variables must be a JSON object"));
  ChatTemplateOptions bad;
  bad.max_depth = 0;
  EXPECT_FALSE(ChatTemplate::parse("x", bad).ok());
}

TEST(ChatTemplateTest, KeepsKeyOrderOfOrderedJson) {
  auto t = ChatTemplate::parse("{{ tools | tojson }}");
  ASSERT_TRUE(t.ok());
  Json extra = Json::parse(R"({"tools": {"zeta": 1, "alpha": 2}})");
  EXPECT_EQ(*t->render(Json::array(), false, extra), R"({"zeta": 1, "alpha": 2})");
  nlohmann::json sorted = nlohmann::json::parse(R"({"tools": {"zeta": 1, "alpha": 2}})");
  EXPECT_EQ(*t->render(nlohmann::json::array(), false, sorted), R"({"alpha": 2, "zeta": 1})");
}

}  // namespace
}  // namespace hz
