// ServerProcess: runs `horizon serve` as a child process on an ephemeral loopback port for
// end-to-end tests; stops it (SIGTERM) on destruction.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hz::test {

class ServerProcess {
 public:
  // Starts `horizon serve <args> --port 0` and waits until it logs its address (or fails).
  explicit ServerProcess(const std::vector<std::string>& args);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const;  // what the server printed so far
  // Sends SIGTERM and waits; returns the exit status (or -1 on timeout, after SIGKILL).
  int terminate(int timeout_s = 30);

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

// Plain HTTP GET/POST with curl: returns the HTTP status code, body in *body.
int http_request(const std::string& method, const std::string& url, const std::string& json_body, std::string* body);

}  // namespace hz::test
