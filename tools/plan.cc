// `horizon plan PATH`: will this model fit? Weights, KV per token per type, runtime overhead, the
// largest context at each concurrency, and the remedies when the requested setting does not fit.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "planner/capacity_plan.h"
#include "planner/host_info.h"
#include "planner/model_shape.h"
#include "tools/cli.h"
#include "tools/config_file.h"
#include "tools/engine_flags.h"
#include "tools/plan_flags.h"

namespace hz::cli {
namespace {

struct PlanCliOptions {
  EngineFlags engine;
  bool json = false;
  PlanFlags flags;
};

int run_plan(const PlanCliOptions& o) {
  auto eo = o.engine.resolve();
  if (!eo.ok()) return fail(eo.status().message());
  HostInfo host = probe_host();
  auto opts = o.flags.to_options(*eo, host);
  if (!opts.ok()) return fail(opts.status().message());
  auto shape = load_model_shape(eo->model_path);
  if (!shape.ok()) return fail(shape.status().message());
  auto plan = make_plan(*shape, *opts);
  if (!plan.ok()) return fail(plan.status().message());
  if (o.json) {
    fmt::print("{}\n", plan_to_json(*plan).dump(2));
  } else {
    fmt::print("{}", plan_to_text(*plan));
  }
  return 0;
}

Subcommand kPlan("plan", "Plan memory: will a model (GGUF, HF folder or config.json) fit, and with which settings",
                 [](CLI::App& app) {
                   auto o = std::make_shared<PlanCliOptions>();
                   add_config_flag(app);
                   // The engine's flags with the engine's meaning; plan for one sequence unless told.
                   o->engine.opts.max_num_seqs = 1;
                   o->engine.add_to(app, /*server=*/true);
                   app.add_flag("--json", o->json, "Print JSON");
                   o->flags.add_to(app);
                   return [o] { return run_plan(*o); };
                 });

}  // namespace
}  // namespace hz::cli
