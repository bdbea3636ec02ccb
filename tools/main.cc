// horizon: one binary, subcommands registered by the files in tools/.
#include <algorithm>
#include <cstdio>

#include "base/log.h"
#include "base/version.h"
#include "tools/cli.h"

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
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(hz::horizon_version()) + " (" + hz::horizon_git_hash() + ")");
  auto& defs = hz::cli::registry();
  std::sort(defs.begin(), defs.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::function<int()> action;
  for (auto& def : defs) {
    CLI::App* sub = app.add_subcommand(def.name, def.help);
    auto run = def.setup(*sub);
    sub->callback([&action, run] { action = run; });
  }
  if (argc == 1) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error of the tool.
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return e.get_exit_code() != 0 ? e.get_exit_code() : 2;
  }
  return action ? action() : 0;
}
