#include "base/version.h"

namespace hz {

const char* horizon_version() { return HORIZON_VERSION; }
const char* horizon_git_hash() { return HORIZON_GIT_HASH; }

}  // namespace hz
