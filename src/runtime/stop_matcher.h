// StopMatcher: finds stop strings in streamed text. Text that could still turn into a stop string
// is held back until it cannot; the stop string itself is never emitted.
#pragma once

#include <string>
#include <vector>

namespace hz {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Adds text; returns what can be emitted now. Sets `stopped` when a stop string matched (the
  // returned text then ends just before it, and later pushes return nothing).
  std::string push(const std::string& text, bool* stopped);
  // Releases held-back text at the end of generation.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace hz
