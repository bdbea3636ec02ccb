// Transparent huge pages: what the kernel offers, and whether the weights use them.
#pragma once

#include <string>

namespace hz {

// The kernel's transparent-huge-page mode ("always", "madvise" or "never"), or "" where there is
// none (no /sys/kernel/mm/transparent_hugepage/enabled).
std::string transparent_huge_page_mode();

// Weights go into huge pages: HORIZON_HUGEPAGES is not "0" and the mode is "always" or "madvise".
// Read once per process.
bool huge_pages_for_weights();

}  // namespace hz
