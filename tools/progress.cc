#include "tools/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "base/byte_size.h"
#include "base/progress.h"

namespace hz::cli {
namespace {

// Nothing is shown for work shorter than this (HORIZON_PROGRESS_DELAY_MS overrides: tests use 0).
std::chrono::milliseconds show_after() {
  const char* env = std::getenv("HORIZON_PROGRESS_DELAY_MS");
  if (env != nullptr) return std::chrono::milliseconds(std::atoll(env));
  return std::chrono::milliseconds(1000);
}

}  // namespace

bool ProgressBar::stderr_is_tty() { return isatty(STDERR_FILENO) != 0; }

ProgressBar::ProgressBar(std::string label, uint64_t total, Unit unit, bool quiet)
    : label_(std::move(label)),
      total_(total),
      unit_(unit),
      quiet_(quiet || total == 0),
      tty_(stderr_is_tty()),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
  if (open_line_) std::fputc('\n', stderr);
}

std::string ProgressBar::figures(uint64_t done) const {
  if (unit_ == Unit::kBytes) return fmt::format("{} of {}", format_bytes(done), format_bytes(total_));
  return fmt::format("{}/{}", done, total_);
}

void ProgressBar::update(uint64_t done, const std::string& note) {
  if (quiet_ || finished_) return;
  if (done > total_) done = total_;
  const auto now = std::chrono::steady_clock::now();
  if (!shown_) {
    if (now - start_ < show_after()) return;
    shown_ = true;
  }
  const double secs = std::chrono::duration<double>(now - start_).count();
  const int pct = static_cast<int>(100 * done / total_);
  const std::string tail = note.empty() ? "" : " " + note;
  if (tty_) {
    // Redraw at most 10 times a second, and always at the end.
    if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total_);
    std::string bar(filled, '#');
    bar.append(kWidth - filled, ' ');
    std::fprintf(stderr, "\r\033[K%s [%s] %3d%% %s %.1f s%s", label_.c_str(), bar.c_str(), pct, figures(done).c_str(), secs,
                 tail.c_str());
    std::fflush(stderr);
    open_line_ = true;
    return;
  }
  const int decile = pct / 10;
  if (decile <= last_decile_) return;
  last_decile_ = decile;
  std::fprintf(stderr, "%s: %3d%% (%s, %.1f s)%s\n", label_.c_str(), decile * 10, figures(done).c_str(), secs, tail.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish(const std::string& note) {
  if (quiet_ || finished_) return;
  if (shown_) update(total_, note);
  finished_ = true;
  if (open_line_) {
    std::fputc('\n', stderr);
    std::fflush(stderr);
    open_line_ = false;
  }
}

namespace {

struct StageBars {
  std::string stage;
  std::unique_ptr<ProgressBar> bar;
};

}  // namespace

LibraryProgress::LibraryProgress(bool quiet) {
  if (quiet) return;
  auto state = std::make_shared<StageBars>();
  set_progress_sink([state](std::string_view stage, uint64_t done, uint64_t total) {
    if (!state->bar || state->stage != stage) {
      if (state->bar) state->bar->finish();
      state->stage = std::string(stage);
      state->bar = std::make_unique<ProgressBar>(state->stage, total, ProgressBar::Unit::kBytes, false);
    }
    state->bar->update(done);
    if (done >= total) {
      state->bar->finish();
      state->bar.reset();
    }
  });
  installed_ = true;
}

LibraryProgress::~LibraryProgress() {
  if (installed_) set_progress_sink(nullptr);
}

}  // namespace hz::cli
