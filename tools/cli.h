// Subcommand registry for the `horizon` binary. Each tools/<name>.cc defines one subcommand and
// registers it with a static Subcommand object; main.cc builds the CLI11 app from the registry.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace hz::cli {

struct SubcommandDef {
  std::string name;
  std::string help;
  // Adds options to `app` and returns the function to run after parsing (exit code).
  std::function<std::function<int()>(CLI::App& app)> setup;
};

std::vector<SubcommandDef>& registry();

struct Subcommand {
  Subcommand(std::string name, std::string help, std::function<std::function<int()>(CLI::App&)> setup) {
    registry().push_back(SubcommandDef{std::move(name), std::move(help), std::move(setup)});
  }
};

// Prints "error: <msg>" on stderr and returns exit code 1 — the one way tools report failure.
int fail(const std::string& msg);

}  // namespace hz::cli
