// Test services on loopback: redis-server and nginx started from the test on free ports in temp
// folders (Debian packages installed by scripts/setup), stopped on destruction. Outside CI a missing
// binary skips the test; under scripts/test (HORIZON_REQUIRE_REDIS=1) or CI it fails it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hz::test {

// An empty string when `binary` is on PATH (or an absolute path that exists), else why not.
std::string missing_binary(const std::string& binary);
// Whether a missing service must fail the test (CI, or HORIZON_REQUIRE_REDIS set).
bool services_required();
// A loopback TCP port that was free a moment ago.
int free_port();

class RedisServer {
 public:
  // Starts redis-server on a free port (no persistence). `extra` are more config lines.
  explicit RedisServer(const std::vector<std::string>& extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool ok() const { return pid_ > 0; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // redis-cli against this server; returns its stdout (trimmed).
  std::string cli(const std::string& args) const;
  void kill_now();   // SIGKILL and reap (the data is gone)
  bool restart();    // a fresh server on the same port
  void freeze();     // SIGSTOP
  void thaw();       // SIGCONT

 private:
  bool start();
  std::string dir_;
  std::vector<std::string> extra_;
  std::string error_;
  pid_t pid_ = -1;
  int port_ = 0;
};

class NginxServer {
 public:
  // Runs nginx with the site file `site_conf` (deploy/nginx/horizon.conf) on a free port, its
  // upstream servers replaced by `upstream_ports` on 127.0.0.1.
  NginxServer(const std::string& site_conf, const std::vector<int>& upstream_ports);
  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  bool ok() const { return pid_ > 0; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string dir_;
  std::string error_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace hz::test
