#include "base/version.h"
#include "bench/conditions.h"

#include <ctime>

#include "kernels/kernels.h"
#include "planner/host_info.h"

namespace hz::bench {

nlohmann::json host_conditions() {
  HostInfo h = probe_host();
  char ts[32] = {0};
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {{"horizon_version", horizon_version()},
          {"git_hash", horizon_git_hash()},
          {"cpu_model", h.cpu_model},
          {"cpu_features", kernels::cpu_features()},
          {"num_cpus", h.num_cpus},
          {"ram_bytes", h.total_ram_bytes},
          {"timestamp", ts}};
}

}  // namespace hz::bench
