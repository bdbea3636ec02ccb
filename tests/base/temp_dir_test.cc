// The tests' temporary folders: removed when the process that made them exits (so repeated runs
// do not fill /tmp), never by a forked child that exits (its parent still uses them).
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/test_support.h"

namespace hz {
namespace {

TEST(TempDirTest, RemovedAtExitOfTheProcessThatMadeItOnly) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A process of its own: makes a folder, forks a child that exits (std::exit runs the static
    // destructors), checks the folder survived it, reports its path, exits.
    close(fds[0]);
    const std::string dir = test::make_temp_dir("tempdir_test");
    std::FILE* f = std::fopen((dir + "/x").c_str(), "w");
    if (f != nullptr) std::fclose(f);
    const pid_t inner = fork();
    if (inner == 0) std::exit(0);
    int st = 0;
    waitpid(inner, &st, 0);
    const bool kept = std::filesystem::exists(dir + "/x");
    const std::string msg = (kept ? "kept " : "gone ") + dir;
    if (write(fds[1], msg.data(), msg.size()) < 0) std::_Exit(3);
    close(fds[1]);
    std::exit(0);
  }
  close(fds[1]);
  std::string msg(4096, '\0');
  const ssize_t n = read(fds[0], msg.data(), msg.size());
  close(fds[0]);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_GT(n, 5);
  msg.resize(static_cast<size_t>(n));
  EXPECT_EQ(msg.substr(0, 5), "kept ") << "a forked child's exit must not remove its parent's folders";
  EXPECT_FALSE(std::filesystem::exists(msg.substr(5))) << "removed when the process that made it exited";
}

}  // namespace
}  // namespace hz
