// The conditions a benchmark ran under (host CPU, features, cores, RAM, horizon version), recorded
// in every report so that a figure is never quoted without them.
#pragma once

#include <nlohmann/json.hpp>

namespace hz::bench {

// {"horizon_version", "git_hash", "cpu_model", "cpu_features", "num_cpus", "ram_bytes", "timestamp"}.
nlohmann::json host_conditions();

}  // namespace hz::bench
