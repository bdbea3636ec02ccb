#include "base/version.h"

namespace hz {

const char* horizon_version() { return HORIZON_VERSION; }
// horizon_git_hash() is generated at build time (cmake/git_hash.cmake).

}  // namespace hz
