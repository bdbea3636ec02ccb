#include "tools/config_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace hz::cli {
namespace {

// The option a config key names: "--key", with '_' read as '-' (max_model_len = max-model-len).
std::string normalize_key(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

class YamlConfig : public CLI::Config {
 public:
  explicit YamlConfig(const CLI::App* app) : app_(app) {}

  std::string to_config(const CLI::App* app, bool, bool, std::string) const override { return effective_config_yaml(*app); }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    YAML::Node root;
    try {
      root = YAML::Load(in);
    } catch (const YAML::Exception& e) {
      throw CLI::ConfigError("--config: not valid YAML: " + std::string(e.what()));
    }
    std::vector<CLI::ConfigItem> items;
    if (root.IsNull()) return items;  // an empty file
    if (!root.IsMap()) throw CLI::ConfigError("--config: the file must be a mapping of flag names to values (max-model-len: 4096)");
    std::vector<std::string> unknown;
    for (const auto& kv : root) {
      CLI::ConfigItem item;
      const std::string raw = kv.first.as<std::string>("");
      item.name = normalize_key(raw);
      if (item.name == "config") throw CLI::ConfigError("--config: a config file cannot name another (key 'config')");
      const CLI::Option* op = app_->get_option_no_throw("--" + item.name);
      if (op == nullptr || op->get_lnames().empty()) {
        unknown.push_back(raw);
        continue;
      }
      const YAML::Node& v = kv.second;
      if (v.IsScalar()) {
        item.inputs.push_back(v.Scalar());
      } else if (v.IsSequence()) {
        for (const auto& e : v) {
          if (!e.IsScalar()) throw CLI::ConfigError("--config: '" + raw + "' must be a value or a list of values");
          item.inputs.push_back(e.Scalar());
        }
      } else if (v.IsNull()) {
        throw CLI::ConfigError("--config: '" + raw + "' has no value");
      } else {
        throw CLI::ConfigError("--config: '" + raw + "' must be a value or a list of values");
      }
      items.push_back(std::move(item));
    }
    if (!unknown.empty()) {
      std::string names;
      for (const auto& u : unknown) names += (names.empty() ? "" : ", ") + u;
      throw CLI::ConfigError("--config: unknown key" + std::string(unknown.size() > 1 ? "s " : " ") + names + " (keys are the long flag names of `horizon " +
                             app_->get_name() + " --help`, without the dashes)");
    }
    return items;
  }

 private:
  const CLI::App* app_;
};

}  // namespace

void add_config_flag(CLI::App& app) {
  app.option_defaults()->always_capture_default();
  app.add_option("--config", "YAML file of flags (keys: long flag names, e.g. max-model-len: 4096); the command line overrides it")
      ->type_name("FILE");
}

void apply_config_file(CLI::App& app) {
  const CLI::Option* config = app.get_option_no_throw("--config");
  if (config == nullptr || config->count() == 0) return;
  const std::string path = config->as<std::string>();
  std::ifstream in(path);
  if (!in) throw CLI::ConfigError("--config " + path + ": cannot open");
  const std::vector<CLI::ConfigItem> items = YamlConfig(&app).from_config(in);
  for (const CLI::ConfigItem& item : items) {
    CLI::Option* op = app.get_option_no_throw("--" + item.name);
    if (op->count() > 0) continue;  // given on the command line: it wins
    if (op->get_expected_min() == 0) {
      if (item.inputs.size() != 1) throw CLI::ConfigError("--config: '" + item.name + "' takes true or false");
      op->add_result(op->get_flag_value(item.name, item.inputs.front()));
    } else {
      op->add_result(item.inputs);
    }
    try {
      op->run_callback();
    } catch (const CLI::ParseError& e) {
      throw CLI::ConfigError("--config " + path + ": " + item.name + ": " + e.what());
    }
  }
}

std::string effective_config_yaml(const CLI::App& app, const std::string& indent) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string positional_model;
  bool key_given = false;
  for (const CLI::Option* op : app.get_options()) {
    if (op->get_lnames().empty() && op->get_name() == "MODEL" && op->count() > 0) positional_model = op->results().front();
  }
  for (const CLI::Option* op : app.get_options()) {
    if (op->get_lnames().empty()) continue;
    const std::string key = op->get_lnames().front();
    if (key == "help" || key == "config") continue;
    if (key == "api-key") {
      // A secret: never printed, and no placeholder a file read back would take for a key.
      for (const std::string& v : op->results()) key_given |= !v.empty();
      continue;
    }
    std::vector<std::string> values;
    if (op->count() > 0) {
      values = op->results();
      // A flag's results are counts ("1"): true is what the file takes.
      if (op->get_expected_min() == 0) values = {op->as<bool>() ? "true" : "false"};
    } else if (key == "model" && !positional_model.empty()) {
      values = {positional_model};
    } else if (op->get_expected_min() == 0) {
      values = {"false"};
    } else if (!op->get_default_str().empty()) {
      values = {op->get_default_str()};
    }
    if (values.empty()) continue;
    out << YAML::Key << key << YAML::Value;
    if (values.size() == 1 && op->get_expected_max() <= 1) {
      out << values.front();
    } else {
      out << YAML::Flow << values;
    }
  }
  out << YAML::EndMap;
  std::istringstream lines(out.c_str());
  std::string line, text;
  while (std::getline(lines, line)) text += indent + line + "\n";
  if (key_given) text += indent + "# api-key: set (not printed)\n";
  return text;
}

}  // namespace hz::cli
