// `--config horizon.yaml`: any flag of a subcommand in a YAML file (keys = long flag names without
// the dashes, e.g. `max-model-len: 4096`, `enable-prefix-caching: true`, lists for repeatable
// flags). Flags on the command line override the file; an unknown key is an error naming it.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace hz::cli {

// Adds --config FILE to `app`; call before its other options (their defaults are captured for
// effective_config_yaml).
void add_config_flag(CLI::App& app);
// After parsing: fills the options not given on the command line from the --config file, if any.
// Errors are CLI::ConfigError naming the file and key.
void apply_config_file(CLI::App& app);

// The options of `app` after parsing, as YAML that --config accepts: given values, else the
// defaults; each line prefixed with `indent`. An API key shows as "(set)", never its value.
std::string effective_config_yaml(const CLI::App& app, const std::string& indent = "");

}  // namespace hz::cli
