// The planner's own flags (--memory, --weight-type), shared by `horizon plan` and `horizon doctor`;
// everything else a plan needs comes from the engine flags (tools/engine_flags.h), so a flag means
// the same to plan, doctor, run and serve.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "base/status.h"
#include "planner/capacity_plan.h"
#include "planner/host_info.h"
#include "runtime/engine_options.h"

namespace hz::cli {

struct PlanFlags {
  std::string memory;       // "" = available RAM
  std::string weight_type;  // "" = the file's own

  void add_to(CLI::App& app);
  // The plan for running with `engine`; errors name the flag.
  Result<PlanOptions> to_options(const EngineOptions& engine, const HostInfo& host) const;
};

}  // namespace hz::cli
