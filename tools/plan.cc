// `horizon plan PATH`: will this model fit? Weights, KV per token per type, runtime overhead, the
// largest context at each concurrency, and the remedies when the requested setting does not fit.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/byte_size.h"
#include "device/device.h"
#include "kernels/cuda/launch_checks.h"
#include "planner/capacity_plan.h"
#include "planner/device_plan.h"
#include "planner/host_info.h"
#include "model/model_shape.h"
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
  std::string device_memory;   // plan for a GPU of this size ("" = the GPU's free memory)
};

// --device cuda: the same model and options planned on GPU memory.
int run_device_plan(const PlanCliOptions& o, const PlanReport& host, const ModelShape& shape, PlanOptions opts) {
  std::string name = "--device-memory";
  uint64_t bytes = 0;
  if (!o.device_memory.empty()) {
    auto b = parse_byte_size(o.device_memory, "--device-memory");
    if (!b.ok()) return fail(b.status().message());
    bytes = *b;
  } else {
    auto d = device::query(0);
    if (!d.ok()) return fail(fmt::format("--device cuda: {}; give --device-memory SIZE to plan without a GPU", d.status().message()));
    name = device::describe(*d);
    bytes = d->free_bytes;
  }
  // The GPU reads f32, f16, bf16, q8_0 and q4_0 matrices; other types are planned converted to q8_0.
  const std::string& ft = shape.file_weight_type;
  const bool native = opts.weight_type ? cuda::weight_type_supported(*opts.weight_type)
                                       : (ft.empty() || ft == "f32" || ft == "f16" || ft == "bf16" || ft == "q8_0" || ft == "q4_0");
  uint64_t weights = host.weights_bytes;
  std::string type = host.weight_type, note;
  if (!native) {
    opts.weight_type = DType::kQ8_0;
    auto q8 = make_plan(shape, opts);
    if (!q8.ok()) return fail(q8.status().message());
    weights = q8->weights_bytes;
    note = fmt::format("{} matrices are planned converted to q8_0 (the GPU reads f32 f16 bf16 q8_0 q4_0)", type);
    type = "q8_0";
  }
  auto p = make_device_plan(host, name, bytes, type, weights, note);
  if (!p.ok()) return fail(p.status().message());
  if (o.json) {
    fmt::print("{}\n", device_plan_to_json(*p).dump(2));
  } else {
    fmt::print("{}", device_plan_to_text(*p));
  }
  return 0;
}

int run_plan(const PlanCliOptions& o) {
  // --device (an engine flag) says where to plan; planning for a GPU needs none here.
  const std::string device = o.engine.device;
  EngineFlags engine = o.engine;
  engine.device = "cpu";
  auto eo = engine.resolve();
  if (!eo.ok()) return fail(eo.status().message());
  HostInfo host = probe_host();
  auto opts = o.flags.to_options(*eo, host);
  if (!opts.ok()) return fail(opts.status().message());
  auto shape = load_model_shape(eo->model_path);
  if (!shape.ok()) return fail(shape.status().message());
  auto plan = make_plan(*shape, *opts);
  if (!plan.ok()) return fail(plan.status().message());
  if (device == "cuda") return run_device_plan(o, *plan, *shape, *opts);
  if (device != "cpu") return fail(fmt::format("--device '{}' is not one of cpu, cuda", device));
  if (!o.device_memory.empty()) return fail("--device-memory needs --device cuda");
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
                   // The engine's flags with the engine's meaning; plan for one sequence unless told (the
                   // report says that serve runs more).
                   o->engine.opts.max_num_seqs = 1;
                   o->engine.add_to(app, /*server=*/true);
                   app.add_flag("--json", o->json, "Print JSON");
                   o->flags.add_to(app);
                   app.add_option("--device-memory", o->device_memory,
                                  "With --device cuda: plan for a GPU of this size (e.g. 80GiB) instead of the one here");
                   return [o] { return run_plan(*o); };
                 });

}  // namespace
}  // namespace hz::cli
