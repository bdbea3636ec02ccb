// Progress of long work on stderr: a bar rewritten in place on a terminal, one line per 10%
// otherwise (logs, CI), nothing when quiet. Work that ends within a second shows nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hz::cli {

class ProgressBar {
 public:
  enum class Unit { kCount, kBytes };
  // `label` heads every line ("perplexity", "packing weights"); `total` > 0 units.
  ProgressBar(std::string label, uint64_t total, Unit unit, bool quiet);
  ~ProgressBar();  // ends a bar line left open
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // done of total, with an optional note after the figures ("ppl 5.12 ± 0.03").
  void update(uint64_t done, const std::string& note = "");
  // Ends the bar line (a terminal) or prints the 100% line if it was not printed.
  void finish(const std::string& note = "");

  // True when stderr is a terminal (bar) rather than a file or pipe (lines).
  static bool stderr_is_tty();

 private:
  std::string figures(uint64_t done) const;
  std::string label_;
  uint64_t total_;
  Unit unit_;
  bool quiet_, tty_;
  bool shown_ = false, open_line_ = false, finished_ = false;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
};

// Shows the library's progress reports (base/progress.h: packing weights, hashing weights) with a
// ProgressBar per stage, until the returned guard is destroyed. quiet = install nothing.
class LibraryProgress {
 public:
  explicit LibraryProgress(bool quiet);
  ~LibraryProgress();
  LibraryProgress(const LibraryProgress&) = delete;
  LibraryProgress& operator=(const LibraryProgress&) = delete;

 private:
  bool installed_ = false;
};

}  // namespace hz::cli
