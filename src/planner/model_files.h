// Pre-flight checks of a model on disk (for `horizon doctor`): a GGUF file parses and has the
// hyper-parameters the planner needs; a Hugging Face folder has its required files and every shard
// its index names, each with a sane safetensors header.
#pragma once

#include <string>
#include <vector>

namespace hz {

enum class CheckLevel { kPass, kWarn, kFail };
const char* check_level_name(CheckLevel l);  // "PASS", "WARN", "FAIL"

struct CheckResult {
  CheckLevel level = CheckLevel::kPass;
  std::string name;    // short: "model", "shards", "tokenizer"
  std::string detail;  // one line
};

std::vector<CheckResult> check_model_files(const std::string& path);

}  // namespace hz
