#include "bench/child_process.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hz::bench {
namespace {

std::string read_all(int fd) {
  std::string s;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      s.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  return s;
}

}  // namespace

std::string shell_join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") == std::string::npos;
    if (plain) {
      s += a;
      continue;
    }
    s += '\'';
    for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
    s += '\'';
  }
  return s;
}

Result<std::string> self_executable() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return io_error("cannot read /proc/self/exe: {}", std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

Result<ChildResult> run_child(const std::vector<std::string>& argv) {
  if (argv.empty()) return invalid_argument("run_child: empty command");
  if (access(argv[0].c_str(), X_OK) != 0) return not_found("'{}' is not an executable file: {}", argv[0], std::strerror(errno));
  // stderr goes to an unlinked temporary file: a pipe for both streams would need a poll loop
  // to avoid a deadlock, and only the tail of stderr matters.
  char err_path[] = "/tmp/hz_child_stderr_XXXXXX";
  int err_fd = mkstemp(err_path);
  if (err_fd < 0) return io_error("cannot create a temporary file: {}", std::strerror(errno));
  unlink(err_path);
  int out_pipe[2];
  if (pipe(out_pipe) != 0) {
    close(err_fd);
    return io_error("pipe: {}", std::strerror(errno));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    close(err_fd);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return io_error("fork: {}", std::strerror(errno));
  }
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    close(out_pipe[0]);
    close(out_pipe[1]);
    close(err_fd);
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  ChildResult r;
  r.stdout_text = read_all(out_pipe[0]);
  close(out_pipe[0]);
  int status = 0;
  struct rusage ru {};
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  struct stat st {};
  if (fstat(err_fd, &st) == 0) {
    const off_t keep = 4096;
    const off_t from = st.st_size > keep ? st.st_size - keep : 0;
    lseek(err_fd, from, SEEK_SET);
    r.stderr_tail = read_all(err_fd);
  }
  close(err_fd);
  return r;
}

}  // namespace hz::bench
