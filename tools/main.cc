// horizon: one binary, subcommands registered by the files in tools/.
#include <algorithm>
#include <cstdio>

#include "base/log.h"
#include "base/version.h"
#include "tools/cli.h"
#include "tools/compat_args.h"
#include "tools/config_file.h"

namespace hz::cli {

std::vector<SubcommandDef>& registry() {
  static std::vector<SubcommandDef> defs;
  return defs;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 1;
}

}  // namespace hz::cli

int main(int argc, char** argv) {
  hz::init_logging();
  CLI::App app{"horizon: long-context LLM inference engine and OpenAI-compatible server"};
  app.name("horizon");
  app.require_subcommand(1);
  // A flag given twice takes its last value, as llama.cpp's tools do (repeatable ones keep all).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string(hz::horizon_version()) + " (" + hz::horizon_git_hash() + ")");
  auto& defs = hz::cli::registry();
  std::sort(defs.begin(), defs.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::function<int()> action;
  for (auto& def : defs) {
    CLI::App* sub = app.add_subcommand(def.name, def.help);
    auto run = def.setup(*sub);
    sub->callback([&action, run, sub] {
      hz::cli::apply_config_file(*sub);
      action = run;
    });
  }
  if (argc == 1 || std::string(argv[1]) == "help") {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  // The first argument names the command: an unknown one is said so, with the nearest name.
  if (argv[1][0] != '-') {
    const std::string first = argv[1];
    bool known = false;
    std::string nearest;
    size_t best = 3;  // suggest names at most 2 edits away
    for (const auto& def : defs) {
      known |= def.name == first;
      size_t d = hz::cli::edit_distance(first, def.name);
      if (first.size() >= 3 && def.name.rfind(first, 0) == 0) d = std::min<size_t>(d, 1);  // a prefix: "perp"
      if (d < best) {
        best = d;
        nearest = def.name;
      }
    }
    if (!known) {
      std::fprintf(stderr, "error: '%s' is not a horizon command%s (horizon --help lists them)\n", first.c_str(),
                   nearest.empty() ? "" : (" (did you mean '" + nearest + "'?)").c_str());
      return 2;
    }
  }
  // llama-server's -np, -ctk ... become long flags; CLI11 takes the arguments in reverse order.
  std::vector<std::string> args = hz::cli::rewrite_compat_args(std::vector<std::string>(argv + 1, argv + argc));
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error of the tool, with what to type instead of a flag that
    // llama-server or vLLM take and horizon does not.
    std::string hints;
    std::string what = e.what();
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      size_t colon = what.find(": ");
      std::string list = colon == std::string::npos ? "" : what.substr(colon + 2);
      std::vector<std::string> extras;
      size_t pos = 0;
      while (pos < list.size()) {
        size_t end = list.find(' ', pos);
        if (end == std::string::npos) end = list.size();
        std::string arg = list.substr(pos, end - pos);
        extras.push_back(arg);
        pos = end + 1;
      }
      // The parser saw the arguments reversed: name them (and hint) in the order they were typed.
      std::string typed;
      for (auto it = extras.rbegin(); it != extras.rend(); ++it) {
        typed += (typed.empty() ? "" : " ") + *it;
        std::string hint = hz::cli::compat_hint(*it);
        if (!hint.empty()) hints += "; " + it->substr(0, it->find('=')) + ": " + hint;
      }
      if (colon != std::string::npos) what = what.substr(0, colon + 2) + typed;
    }
    std::fprintf(stderr, "error: %s (see --help)%s\n", what.c_str(), hints.c_str());
    return e.get_exit_code() != 0 ? e.get_exit_code() : 2;
  }
  return action ? action() : 0;
}
