#include "base/huge_pages.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

namespace hz {

std::string transparent_huge_page_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);  // e.g. "always [madvise] never": the bracketed one is in force
  const size_t a = line.find('['), b = line.find(']');
  return a != std::string::npos && b != std::string::npos && b > a ? line.substr(a + 1, b - a - 1) : std::string();
}

bool huge_pages_for_weights() {
  static const bool on = [] {
    const char* env = std::getenv("HORIZON_HUGEPAGES");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    const std::string mode = transparent_huge_page_mode();
    return mode == "always" || mode == "madvise";
  }();
  return on;
}

}  // namespace hz
