// Progress of long work inside the library (packing weights at load, hashing weights for the KV
// store): library code reports, a tool installs the one process-wide sink that shows it. Without a
// sink a report costs a relaxed atomic load.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace hz {

// stage: a short fixed text ("loading weights"); done of total units (bytes, items); done ==
// total marks the end. Called from any thread; the sink is called with a lock held.
using ProgressSink = std::function<void(std::string_view stage, uint64_t done, uint64_t total)>;

void set_progress_sink(ProgressSink sink);  // empty = none
void report_progress(std::string_view stage, uint64_t done, uint64_t total);

}  // namespace hz
