// What this machine offers: CPU model and flags, cores, RAM, free disk. Read from /proc and
// statvfs; the only non-pure file of the planner (plan defaults to the available RAM, doctor and
// bench report these).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hz {

struct HostInfo {
  std::string cpu_model;             // "model name" of /proc/cpuinfo
  std::vector<std::string> cpu_flags;
  uint64_t num_cpus = 0;             // logical CPUs this process may run on
  uint64_t total_ram_bytes = 0;      // MemTotal
  uint64_t available_ram_bytes = 0;  // MemAvailable (or a cgroup limit when lower)

  bool has_flag(const std::string& flag) const;
};

HostInfo probe_host();
// Free bytes for an unprivileged user on the file system holding `path`; 0 when unknown.
uint64_t free_disk_bytes(const std::string& path);

}  // namespace hz
