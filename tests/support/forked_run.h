// Runs a test scenario in a forked child, so its peak RSS (ru_maxrss from wait4) is its own
// high-water mark; and the KV precisions the memory tests use.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "kv/kv_layout.h"

namespace hz::test {

struct ChildRun {
  int exit_code = -1;  // the scenario's return value, or 128 + signal
  uint64_t peak_rss = 0;
  double seconds = 0;
};

inline ChildRun run_in_child(const std::function<int()>& scenario) {
  const auto t0 = std::chrono::steady_clock::now();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(scenario());
  ChildRun r;
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.peak_rss = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// One KV type for every position.
inline KvPrecision uniform_kv(KvType t) {
  KvPrecision p;
  p.hot = p.cold = t;
  return p;
}

// The newest `window` positions in f16, older blocks in `cold`.
inline KvPrecision windowed_kv(uint64_t window, KvType cold) {
  KvPrecision p;
  p.hot = KvType::kF16;
  p.cold = cold;
  p.hot_window = window;
  return p;
}

// A gtest parameter name for a KV precision: its name with every non-alphanumeric character as '_'.
inline std::string kv_param_name(const KvPrecision& p) {
  std::string n = kv_precision_name(p);
  for (auto& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

}  // namespace hz::test
