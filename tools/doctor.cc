// `horizon doctor`: the pre-flight checklist of a deployment, one line per check (PASS/WARN/FAIL),
// exit status 1 when any check fails.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/byte_size.h"
#include "base/huge_pages.h"
#include "device/device.h"
#include "kernels/kernels.h"
#include "kernels/vnni_dispatch.h"
#include "planner/capacity_plan.h"
#include "planner/host_info.h"
#include "planner/model_files.h"
#include "model/model_shape.h"
#include "tools/cli.h"
#include "tools/config_file.h"
#include "tools/plan_flags.h"
#include "tools/serve_flags.h"

namespace hz::cli {
namespace {

// Every flag of `horizon serve` (so a serve command line can be checked as it is) and the plan's.
struct DoctorOptions {
  ServeFlags serve;
  PlanFlags plan;
};

// Tries to bind host:port the way the server will (SO_REUSEADDR, so a port in TIME_WAIT counts as
// free but one with a listener does not).
CheckResult check_port(const std::string& host, int port) {
  if (port <= 0 || port > 65535) return {CheckLevel::kFail, "port", fmt::format("--port {} is not between 1 and 65535", port)};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) return {CheckLevel::kFail, "port", fmt::format("--host {}: cannot resolve: {}", host, gai_strerror(gai))};
  CheckResult r{CheckLevel::kFail, "port", ""};
  int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  if (fd < 0) {
    r.detail = fmt::format("cannot create a socket: {}", std::strerror(errno));
  } else {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) == 0 && listen(fd, 1) == 0) {
      r = {CheckLevel::kPass, "port", fmt::format("{}:{} is free", host, port)};
    } else {
      int err = errno;
      r.detail = err == EADDRINUSE ? fmt::format("{}:{} is already in use (another server running?)", host, port)
                                   : fmt::format("cannot bind {}:{}: {}", host, port, std::strerror(err));
    }
    close(fd);
  }
  freeaddrinfo(res);
  return r;
}

// Transparent huge pages for the weights (model/weights.cc): used in "always" and "madvise" mode.
CheckResult check_huge_pages() {
  const char* env = std::getenv("HORIZON_HUGEPAGES");
  if (env != nullptr && std::strcmp(env, "0") == 0) return {CheckLevel::kPass, "pages", "weights in 4 KiB pages (HORIZON_HUGEPAGES=0)"};
  const std::string mode = transparent_huge_page_mode();
  if (huge_pages_for_weights()) {
    return {CheckLevel::kPass, "pages", fmt::format("transparent huge pages ({}): weight matrices of 2 MiB or more go into huge pages", mode)};
  }
  return {CheckLevel::kPass, "pages",
          mode.empty() ? "no transparent huge pages here: the weights stay in 4 KiB pages"
                       : fmt::format("transparent huge pages are '{}': the weights stay in 4 KiB pages (decode can be slower)", mode)};
}

// The GPU for `--device cuda`: its name, memory and driver, or why there is none (not a failure:
// the CPU engine runs without one).
CheckResult check_gpu() {
  auto d = device::query(0);
  if (!d.ok()) return {CheckLevel::kPass, "gpu", fmt::format("no GPU, CPU only ({})", d.status().message())};
  Status usable = device::require_gpu("--device cuda");
  if (!usable.ok()) return {CheckLevel::kWarn, "gpu", fmt::format("{}: {}", device::describe(*d), usable.message())};
  return {CheckLevel::kPass, "gpu", device::describe(*d)};
}

int run_doctor(DoctorOptions& d) {
  std::vector<CheckResult> checks;
  HostInfo host = probe_host();
  // The flags first: what serve would refuse, doctor reports.
  auto engine_opts = d.serve.engine.resolve(/*need_model=*/false);
  Status server_flags = d.serve.resolve_server(/*warn=*/false);
  if (!engine_opts.ok()) checks.push_back({CheckLevel::kFail, "flags", engine_opts.status().message()});
  if (!server_flags.ok()) checks.push_back({CheckLevel::kFail, "flags", server_flags.message()});
  struct {
    std::string model, host;
    bool keys;
    int port;
  } o{engine_opts.ok() ? engine_opts->model_path : std::string(), d.serve.server.host, !d.serve.server.api_keys.empty(),
      d.serve.server.port};

  // CPU: the AVX2 kernels need avx2 + fma + f16c; without them the scalar kernels still run.
  std::string features = kernels::cpu_features();
  bool avx2 = features.find("avx2") != std::string::npos && features.find("fma") != std::string::npos &&
              features.find("f16c") != std::string::npos;
  std::string kernel_set = avx2 ? ": AVX2 kernels" : ": no AVX2/FMA/F16C, scalar kernels (slow)";
  if (avx2 && kernels::vnni_split_enabled()) {
    kernel_set += " with the AVX-512 variants (VNNI and 512-bit matmuls, attention; 256-bit kernels where this CPU "
                  "runs them faster)";
  } else if (avx2 && kernels::vnni_wide_enabled()) {
    kernel_set += " with the AVX-512 variants (VNNI and 512-bit matmuls, attention)";
  } else if (avx2 && kernels::vnni_enabled()) {
    kernel_set += " with the 256-bit VNNI matmuls (HORIZON_VNNI=256)";
  }
  if (avx2 && kernels::vnni_supported() && !kernels::vnni_enabled()) kernel_set += " (AVX-512 variants off: HORIZON_VNNI=0)";
  if (avx2 && kernels::amx_enabled()) {
    kernel_set += ", AMX tiles for Q4_0/Q8_0 matmuls of 16+ tokens";
  } else if (avx2 && kernels::vnni_enabled() && kernels::amx_supported()) {
    kernel_set += " (AMX off: HORIZON_AMX=0)";
  }
  checks.push_back({avx2 ? CheckLevel::kPass : CheckLevel::kWarn, "cpu",
                    fmt::format("{} [{}]{}", host.cpu_model.empty() ? "unknown CPU" : host.cpu_model, features, kernel_set)});
  checks.push_back(check_huge_pages());
  checks.push_back({host.num_cpus >= 2 ? CheckLevel::kPass : CheckLevel::kWarn, "cores", fmt::format("{} logical CPUs", host.num_cpus)});
  checks.push_back({host.available_ram_bytes >= (uint64_t{1} << 30) ? CheckLevel::kPass : CheckLevel::kWarn, "ram",
                    fmt::format("{} available of {}", format_bytes(host.available_ram_bytes), format_bytes(host.total_ram_bytes))});
  checks.push_back(check_gpu());
  std::string disk_path = ".";
  if (!o.model.empty()) {
    std::error_code ec;
    std::filesystem::path p(o.model);
    disk_path = std::filesystem::is_directory(p, ec) ? p.string() : (p.has_parent_path() ? p.parent_path().string() : ".");
  }
  uint64_t disk = free_disk_bytes(disk_path);
  checks.push_back({disk >= (uint64_t{1} << 30) ? CheckLevel::kPass : CheckLevel::kWarn, "disk",
                    fmt::format("{} free on {}", format_bytes(disk), disk_path)});

  if (!o.model.empty()) {
    auto files = check_model_files(o.model);
    bool model_ok = true;
    for (auto& c : files) {
      model_ok &= c.level != CheckLevel::kFail;
      checks.push_back(std::move(c));
    }
    if (model_ok) {
      auto opts = engine_opts.ok() ? d.plan.to_options(*engine_opts, host) : Result<PlanOptions>(engine_opts.status());
      auto shape = load_model_shape(o.model);
      if (!engine_opts.ok()) {
        // reported above
      } else if (!opts.ok()) {
        checks.push_back({CheckLevel::kFail, "plan", opts.status().message()});
      } else if (!shape.ok()) {
        checks.push_back({CheckLevel::kFail, "plan", shape.status().message()});
      } else {
        auto plan = make_plan(*shape, *opts);
        if (!plan.ok()) {
          checks.push_back({CheckLevel::kFail, "plan", plan.status().message()});
        } else if (plan->fits) {
          if (shape->max_positions > 0 && plan->requested_context > shape->max_positions &&
              !engine_opts->model_overrides.rope.scaling)
            checks.push_back({CheckLevel::kWarn, "context",
                              fmt::format("--max-model-len {} is beyond the model's context length of {} tokens and no "
                                          "--rope-scaling is set: output degrades past {}",
                                          plan->requested_context, shape->max_positions, shape->max_positions)});
          if (engine_opts->kv_budget_bytes > 0 && engine_opts->kv_disk_dir.empty()) {
            // The pool serve would make: can one sequence of the whole context fit in it?
            const uint64_t tokens = max_tokens_per_seq(shape->kv_geometry(), opts->kv, opts->block_tokens,
                                                       engine_opts->kv_budget_bytes, 1);
            if (tokens < plan->requested_context)
              checks.push_back({CheckLevel::kFail, "kv",
                                fmt::format("--kv-budget {} holds {} tokens, less than one sequence of {}: requests that "
                                            "long would be refused (raise --kv-budget or lower --max-model-len)",
                                            format_bytes(engine_opts->kv_budget_bytes), tokens, plan->requested_context)});
          }
          checks.push_back({CheckLevel::kPass, "plan",
                            fmt::format("{} sequence(s) x {} tokens at {} KV need {} of {}", opts->max_num_seqs,
                                        plan->requested_context, kv_precision_name(opts->kv), format_bytes(plan->required_bytes),
                                        format_bytes(opts->memory_bytes))});
        } else {
          std::string hint;
          for (const auto& r : plan->remedies) {
            if (r.fits) {
              hint = fmt::format("; try {}", r.flags);
              break;
            }
          }
          checks.push_back({CheckLevel::kFail, "plan",
                            fmt::format("{} sequence(s) x {} tokens at {} KV need {} but the budget is {}{} (see horizon plan)",
                                        opts->max_num_seqs, plan->requested_context, kv_precision_name(opts->kv),
                                        format_bytes(plan->required_bytes), format_bytes(opts->memory_bytes), hint)});
        }
      }
    }
  }

  if (server_flags.ok()) checks.push_back(check_port(o.host, o.port));
  if (server_flags.ok() && !is_loopback_address(o.host) && !o.keys) {
    checks.push_back({CheckLevel::kWarn, "auth", fmt::format("--host {} is reachable beyond this machine and no --api-key is set", o.host)});
  } else if (server_flags.ok()) {
    checks.push_back({CheckLevel::kPass, "auth", !o.keys ? "loopback only" : "API key set"});
  }

  int failures = 0;
  for (const auto& c : checks) {
    fmt::print("{}  {:<9} {}\n", check_level_name(c.level), c.name, c.detail);
    failures += c.level == CheckLevel::kFail;
  }
  if (failures > 0) {
    fmt::print(stderr, "error: {} check{} failed\n", failures, failures == 1 ? "" : "s");
    return 1;
  }
  return 0;
}

Subcommand kDoctor("doctor", "Pre-flight checks: CPU, GPU, memory, disk, model files, plan, port (takes every serve flag)", [](CLI::App& app) {
  auto o = std::make_shared<DoctorOptions>();
  add_config_flag(app);
  o->serve.add_to(app);
  o->plan.add_to(app);
  return [o] { return run_doctor(*o); };
});

}  // namespace
}  // namespace hz::cli
