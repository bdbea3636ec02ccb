#include "planner/host_info.h"

#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace hz {

bool HostInfo::has_flag(const std::string& flag) const {
  return std::find(cpu_flags.begin(), cpu_flags.end(), flag) != cpu_flags.end();
}

namespace {

uint64_t meminfo_kib(const std::string& text, const std::string& key) {
  size_t p = text.find(key + ":");
  if (p == std::string::npos) return 0;
  std::istringstream in(text.substr(p + key.size() + 1));
  uint64_t kib = 0;
  in >> kib;
  return kib * 1024;
}

// A cgroup v2 memory limit (containers), or 0 when there is none.
uint64_t cgroup_limit() {
  std::ifstream in("/sys/fs/cgroup/memory.max");
  std::string v;
  if (!(in >> v) || v == "max") return 0;
  try {
    return std::stoull(v);
  } catch (...) {
    return 0;
  }
}

uint64_t cgroup_usage() {
  std::ifstream in("/sys/fs/cgroup/memory.current");
  uint64_t v = 0;
  in >> v;
  return v;
}

}  // namespace

HostInfo probe_host() {
  HostInfo h;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && h.cpu_model.empty()) h.cpu_model = value;
    if (key == "flags" && h.cpu_flags.empty()) {
      std::istringstream in(value);
      std::string f;
      while (in >> f) h.cpu_flags.push_back(f);
    }
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) h.num_cpus = CPU_COUNT(&set);
  if (h.num_cpus == 0) h.num_cpus = static_cast<uint64_t>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  std::ifstream mem("/proc/meminfo");
  std::stringstream ss;
  ss << mem.rdbuf();
  h.total_ram_bytes = meminfo_kib(ss.str(), "MemTotal");
  h.available_ram_bytes = meminfo_kib(ss.str(), "MemAvailable");
  if (uint64_t limit = cgroup_limit(); limit > 0) {
    uint64_t used = cgroup_usage();
    uint64_t left = limit > used ? limit - used : 0;
    h.total_ram_bytes = std::min(h.total_ram_bytes, limit);
    h.available_ram_bytes = std::min(h.available_ram_bytes, left);
  }
  return h;
}

uint64_t free_disk_bytes(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

}  // namespace hz
