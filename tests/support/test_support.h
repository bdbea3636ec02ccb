// Helpers shared by the tests: where the shared folder is, golden files, the horizon binary.
#pragma once

#include <string>
#include <vector>

namespace hz::test {

// The shared folder: $HORIZON_SHARED_DIR, else the path CMake baked in.
std::string shared_dir();
std::string model_path(const std::string& file);    // shared/models/<file>
std::string testdata_path(const std::string& rel);  // shared/testdata/<rel>
// A fresh temporary directory for one test, removed when the test process exits (kept with
// HORIZON_KEEP_TEST_TEMP=1); a test may remove it earlier.
std::string make_temp_dir(const std::string& prefix);

// tests/fixtures/chat_templates/<name> (published chat templates), byte-exact; a missing one fails
// the test.
std::string chat_template_fixture(const std::string& name);

// Runs a shell command, returns its exit code; stdout and stderr captured if the pointers are set.
int run_command(const std::string& cmd, std::string* out = nullptr, std::string* err = nullptr);

}  // namespace hz::test
