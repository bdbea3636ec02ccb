// Runs another program (llama-bench, or horizon itself) as a child process and collects what a
// benchmark needs from it: its stdout, the tail of its stderr, exit status, wall time and peak RSS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace hz::bench {

struct ChildResult {
  int exit_code = -1;      // the exit status, or 128 + signal number when killed by a signal
  std::string stdout_text;
  std::string stderr_tail;  // the last few KiB of stderr, for error messages
  double wall_seconds = 0;
  uint64_t peak_rss_bytes = 0;  // ru_maxrss of the child (wait4), i.e. its own high-water mark
};

// Runs argv[0] (a path, not searched in PATH) with `argv`. Fails only when the program cannot be
// started at all; a non-zero exit is reported in the result.
Result<ChildResult> run_child(const std::vector<std::string>& argv);

// The path of the running executable (/proc/self/exe).
Result<std::string> self_executable();

// "a b 'c d'": argv as a shell would take it back, for messages.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace hz::bench
