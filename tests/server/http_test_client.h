// A raw HTTP/1.1 client for server tests, on plain POSIX sockets so that tests can send anything
// (malformed requests, oversize bodies) and hang up whenever they like. Header-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hz::test {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
};

class TestConnection {
 public:
  explicit TestConnection(int port, int timeout_ms = 10000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~TestConnection() { close(); }
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool connected() const { return connected_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send_raw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  bool send_request(const std::string& method, const std::string& path, const std::string& body = "",
                    const std::vector<std::string>& extra_headers = {}) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (const auto& h : extra_headers) req += h + "\r\n";
    if (!body.empty() || method == "POST") {
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    }
    req += "\r\n" + body;
    return send_raw(req);
  }

  // Reads one whole response (Content-Length, chunked, or until close). Empty on error/timeout.
  std::optional<HttpResponse> read_response() {
    HttpResponse r;
    size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return std::nullopt;
    }
    std::string head = buf_.substr(0, head_end);
    buf_.erase(0, head_end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        r.headers[name] = value;
      }
      pos = e + 2;
    }
    if (r.status / 100 == 1 || r.status == 204 || r.status == 304) return r;  // no body
    if (r.headers.count("transfer-encoding") && r.headers["transfer-encoding"] == "chunked") {
      for (;;) {
        size_t e;
        while ((e = buf_.find("\r\n")) == std::string::npos) {
          if (!fill()) return std::nullopt;
        }
        size_t size = std::stoul(buf_.substr(0, e), nullptr, 16);
        buf_.erase(0, e + 2);
        while (buf_.size() < size + 2) {
          if (!fill()) return std::nullopt;
        }
        r.body += buf_.substr(0, size);
        buf_.erase(0, size + 2);
        if (size == 0) break;
      }
    } else if (r.headers.count("content-length")) {
      size_t len = std::stoul(r.headers["content-length"]);
      while (buf_.size() < len) {
        if (!fill()) return std::nullopt;
      }
      r.body = buf_.substr(0, len);
      buf_.erase(0, len);
    } else {
      while (fill()) {
      }
      r.body.swap(buf_);
    }
    return r;
  }

  // Reads raw bytes until `needle` has arrived (or the timeout); returns what was read so far.
  std::string read_until(const std::string& needle) {
    while (buf_.find(needle) == std::string::npos) {
      if (!fill()) break;
    }
    return buf_;
  }

  // True when the peer closed the connection (reads EOF within the timeout).
  bool wait_closed() {
    char c[256];
    for (;;) {
      ssize_t n = ::recv(fd_, c, sizeof(c), 0);
      if (n == 0) return true;
      if (n < 0) return false;
    }
  }

 private:
  bool fill() {
    char tmp[4096];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

// One request on a fresh connection.
inline HttpResponse http_request(int port, const std::string& method, const std::string& path,
                                 const std::string& body = "", const std::vector<std::string>& headers = {}) {
  TestConnection c(port);
  c.send_request(method, path, body, headers);
  auto r = c.read_response();
  return r ? *r : HttpResponse{};
}

// The JSON payloads of an SSE body ("data: X\n\n" events), in order; "[DONE]" included verbatim.
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      out.push_back("<unterminated>" + body.substr(pos));
      break;
    }
    std::string ev = body.substr(pos, end - pos);
    out.push_back(ev.rfind("data: ", 0) == 0 ? ev.substr(6) : "<bad>" + ev);
    pos = end + 2;
  }
  return out;
}

}  // namespace hz::test
