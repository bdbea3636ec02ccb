#include "base/progress.h"

#include <atomic>
#include <mutex>

namespace hz {
namespace {

std::mutex g_mu;
ProgressSink g_sink;
std::atomic<bool> g_has_sink{false};

}  // namespace

void set_progress_sink(ProgressSink sink) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_sink = std::move(sink);
  g_has_sink.store(static_cast<bool>(g_sink), std::memory_order_relaxed);
}

void report_progress(std::string_view stage, uint64_t done, uint64_t total) {
  if (!g_has_sink.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_sink) g_sink(stage, done, total);
}

}  // namespace hz
