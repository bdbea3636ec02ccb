// Test services on loopback: redis-server and nginx started from the test on free ports in temp
// folders (Debian packages installed by scripts/setup), stopped on destruction. Outside CI a missing
// binary skips the test; under scripts/test (HORIZON_REQUIRE_REDIS=1) or CI it fails it.
// Header-only, so that module-limited tests (linking only kvstore) can use it.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hz::test {


namespace service_detail {

inline bool port_answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

inline pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f != nullptr) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<std::string> a = args;
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

inline void stop(pid_t& pid, int sig) {
  if (pid <= 0) return;
  ::kill(pid, SIGCONT);
  ::kill(pid, sig);
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  pid = -1;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}


// Runs a shell command; its stdout in *out. The exit status.
inline int run(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) {
    if (out != nullptr) out->append(buf, n);
  }
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

inline std::string temp_dir(const std::string& prefix) {
  std::string t = "/tmp/hz_" + prefix + "_XXXXXX";
  return ::mkdtemp(t.data()) != nullptr ? t : "/tmp";
}

}  // namespace service_detail

// An empty string when `binary` is installed, else why not.
inline std::string missing_binary(const std::string& binary) {
  // nginx lives in /usr/sbin, which a user's PATH may lack.
  if (service_detail::run("command -v " + binary + " >/dev/null 2>&1 || test -x /usr/sbin/" + binary) == 0) return "";
  return binary + " is not installed (scripts/setup installs it)";
}

// Whether a missing service must fail the test (CI, or HORIZON_REQUIRE_REDIS set).
inline bool services_required() {
  return std::getenv("CI") != nullptr || std::getenv("HORIZON_REQUIRE_REDIS") != nullptr;
}

// A loopback TCP port that was free a moment ago.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    socklen_t len = sizeof(a);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

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

// ---- redis-server

inline RedisServer::RedisServer(const std::vector<std::string>& extra) : extra_(extra) {
  error_ = missing_binary("redis-server");
  if (!error_.empty()) return;
  dir_ = service_detail::temp_dir("redis");
  port_ = free_port();
  start();
}

inline bool RedisServer::start() {
  std::ofstream conf(dir_ + "/redis.conf");
  conf << "port " << port_ << "\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir " << dir_ << "\nprotected-mode no\n";
  for (const std::string& l : extra_) conf << l << "\n";
  conf.close();
  pid_ = service_detail::spawn({"redis-server", dir_ + "/redis.conf"}, dir_ + "/redis.log");
  for (int i = 0; i < 500; ++i) {
    if (service_detail::port_answers(port_) && cli("PING") == "PONG") return true;
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  error_ = "redis-server did not start: " + service_detail::slurp(dir_ + "/redis.log");
  service_detail::stop(pid_, SIGKILL);
  return false;
}

inline RedisServer::~RedisServer() { service_detail::stop(pid_, SIGKILL); }

inline std::string RedisServer::cli(const std::string& args) const {
  std::string out;
  service_detail::run("redis-cli -p " + std::to_string(port_) + " " + args, &out);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

inline void RedisServer::kill_now() { service_detail::stop(pid_, SIGKILL); }
inline bool RedisServer::restart() {
  service_detail::stop(pid_, SIGKILL);
  return start();
}
inline void RedisServer::freeze() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}
inline void RedisServer::thaw() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

// ---- nginx

inline NginxServer::NginxServer(const std::string& site_conf, const std::vector<int>& upstream_ports) {
  error_ = missing_binary("nginx");
  if (!error_.empty()) return;
  std::string site = service_detail::slurp(site_conf);
  if (site.empty()) {
    error_ = "cannot read " + site_conf;
    return;
  }
  dir_ = service_detail::temp_dir("nginx");
  port_ = free_port();
  // The deployed file, with this test's ports: every "server 127.0.0.1:PORT" upstream line is
  // replaced by the replicas given, every "listen" by the free port.
  std::string servers;
  for (int p : upstream_ports) servers += "    server 127.0.0.1:" + std::to_string(p) + " max_fails=3 fail_timeout=5s;\n";
  site = std::regex_replace(site, std::regex(R"(\n\s*server 127\.0\.0\.1:\d+[^;]*;)"), "\n#upstream#");
  const size_t first = site.find("#upstream#");
  if (first == std::string::npos) {
    error_ = site_conf + " has no 'server 127.0.0.1:PORT' upstream line";
    return;
  }
  site = std::regex_replace(site, std::regex(R"(#upstream#\n?)"), "");
  site.insert(first, servers);
  site = std::regex_replace(site, std::regex(R"(listen\s+[^;]+;)"), "listen 127.0.0.1:" + std::to_string(port_) + ";");
  std::ofstream(dir_ + "/site.conf") << site;
  std::ofstream conf(dir_ + "/nginx.conf");
  conf << "daemon off;\nworker_processes 1;\npid " << dir_ << "/nginx.pid;\nerror_log " << dir_ << "/error.log;\n"
       << "events { worker_connections 256; }\nhttp {\n  access_log off;\n"
       << "  client_body_temp_path " << dir_ << "/body;\n  proxy_temp_path " << dir_ << "/proxy;\n"
       << "  fastcgi_temp_path " << dir_ << "/fastcgi;\n  uwsgi_temp_path " << dir_ << "/uwsgi;\n"
       << "  scgi_temp_path " << dir_ << "/scgi;\n  include " << dir_ << "/site.conf;\n}\n";
  conf.close();
  const std::string nginx = service_detail::run("test -x /usr/sbin/nginx") == 0 ? "/usr/sbin/nginx" : "nginx";
  pid_ = service_detail::spawn({nginx, "-p", dir_, "-c", dir_ + "/nginx.conf"}, dir_ + "/nginx.log");
  for (int i = 0; i < 500; ++i) {
    if (service_detail::port_answers(port_)) return;
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  error_ = "nginx did not start: " + service_detail::slurp(dir_ + "/nginx.log") + service_detail::slurp(dir_ + "/error.log");
  service_detail::stop(pid_, SIGKILL);
}

inline NginxServer::~NginxServer() { service_detail::stop(pid_, SIGQUIT); }


}  // namespace hz::test
