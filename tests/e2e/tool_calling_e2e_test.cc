// Tool calling through the official openai npm client against `horizon serve`: on stories260K
// (no chat template: the generic JSON form) and on a Hugging Face folder built from it carrying
// Qwen2.5's published chat template (Hermes <tool_call> tags). A named call's arguments parse and
// validate against the tool's schema (ajv), streamed deltas (by hand and by the client's stream
// helper) reassemble to the non-streamed reply, required calls validate, a call and its result
// go back through the template. The tool descriptions take more than the model's trained context
// of 512 tokens (its 512-token vocabulary spends about one token per two characters), so the
// tests serve 2048: the output is gibberish either way, the mechanics are what is tested.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/hf_folder_writer.h"
#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

json run_script(const test::ServerProcess& srv) {
  std::string out, err;
  const std::string script = std::string(HORIZON_SOURCE_DIR) + "/tests/e2e/openai_tools.mjs";
  const int rc = test::run_command("node " + script + " " + srv.base_url(), &out, &err);
  EXPECT_EQ(rc, 0) << err << "\n" << srv.log();
  if (rc != 0) return json::object();
  return json::parse(out);
}

void expect_valid_call(const json& r, const char* what, const char* name) {
  SCOPED_TRACE(what);
  EXPECT_EQ(r["finish"], "tool_calls") << r.dump();
  ASSERT_EQ(r["calls"].size(), 1u) << r.dump();
  const json& call = r["calls"][0];
  if (name != nullptr) {
    EXPECT_EQ(call["name"], name);
  }
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_TRUE(call["parses"].get<bool>()) << call["arguments"];
  EXPECT_TRUE(call["valid"].get<bool>()) << call["arguments"];
}

void check(const json& r) {
  ASSERT_TRUE(r.contains("named")) << r.dump();
  expect_valid_call(r["named"], "named", "get_weather");
  expect_valid_call(r["named_stream"], "named, streamed", "get_weather");
  expect_valid_call(r["named_helper"], "named, stream helper", "get_weather");
  // Greedy: streamed and not streamed are the same call.
  EXPECT_EQ(r["named_stream"]["calls"][0]["arguments"], r["named"]["calls"][0]["arguments"]);
  EXPECT_EQ(r["named_helper"]["calls"][0]["arguments"], r["named"]["calls"][0]["arguments"]);
  EXPECT_EQ(r["named_stream"]["content"], r["named"]["content"]);
  expect_valid_call(r["required"], "required", nullptr);
  EXPECT_GT(r["round_trip"]["usage"]["prompt_tokens"].get<int>(), 0);
  // auto: either calls that parse, or text.
  for (const json& call : r["auto"]["calls"]) EXPECT_TRUE(call["parses"].get<bool>()) << r["auto"].dump();
}

TEST(ToolCallingE2ETest, GenericFormatWithoutAChatTemplate) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--max-model-len", "2048"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  check(run_script(srv));
}

TEST(ToolCallingE2ETest, QwenTemplateInAnHfFolder) {
  const std::string dir = test::make_temp_dir("hz-tools-qwen");
  ASSERT_TRUE(test::write_hf_folder(test::model_path("stories260K.gguf"), dir).ok());
  std::ifstream tmpl_in(std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  std::stringstream tmpl;
  tmpl << tmpl_in.rdbuf();
  const std::string cfg_path = dir + "/tokenizer_config.json";
  json cfg = json::parse(std::ifstream(cfg_path));
  cfg["chat_template"] = tmpl.str();
  std::ofstream(cfg_path) << cfg.dump(2);

  test::ServerProcess srv({"-m", dir, "--threads", "2", "--max-model-len", "2048"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  check(run_script(srv));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hz
