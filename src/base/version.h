// The build's version and git hash. Kept behind functions so that a new commit recompiles one
// file (version.cc), not everything that would otherwise see a changing compile definition.
#pragma once

namespace hz {

const char* horizon_version();   // e.g. "0.1.0"
const char* horizon_git_hash();  // short hash of the commit built, or "unknown"

}  // namespace hz
