#include "bench/http_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace hz::bench {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Incremental decoder of a response after its headers.
class BodyDecoder {
 public:
  BodyDecoder(bool chunked, int64_t length, const std::function<void(std::string_view)>& out)
      : chunked_(chunked), remaining_(length), out_(out) {}
  bool done() const { return done_; }
  // Consumes bytes; false on a malformed chunked stream.
  bool feed(std::string_view in) {
    if (!chunked_) {
      if (remaining_ >= 0) {
        in = in.substr(0, static_cast<size_t>(std::min<int64_t>(remaining_, static_cast<int64_t>(in.size()))));
        remaining_ -= static_cast<int64_t>(in.size());
        if (remaining_ == 0) done_ = true;
      }
      if (!in.empty()) out_(in);
      return true;
    }
    buf_.append(in);
    size_t pos = 0;
    while (!done_) {
      if (chunk_left_ > 0) {
        size_t n = std::min<size_t>(chunk_left_, buf_.size() - pos);
        if (n == 0) break;
        out_(std::string_view(buf_).substr(pos, n));
        pos += n;
        chunk_left_ -= n;
        if (chunk_left_ == 0) need_crlf_ = true;
        continue;
      }
      size_t eol = buf_.find("\r\n", pos);
      if (eol == std::string::npos) break;
      std::string line = buf_.substr(pos, eol - pos);
      pos = eol + 2;
      if (need_crlf_) {  // the CRLF after a chunk's data
        if (!line.empty()) return false;
        need_crlf_ = false;
        continue;
      }
      if (in_trailer_) {
        if (line.empty()) done_ = true;
        continue;
      }
      char* end = nullptr;
      unsigned long long size = std::strtoull(line.c_str(), &end, 16);
      if (end == line.c_str()) return false;
      if (size == 0) {
        in_trailer_ = true;
      } else {
        chunk_left_ = size;
      }
    }
    buf_.erase(0, pos);
    return true;
  }
  bool until_close() const { return !chunked_ && remaining_ < 0; }

 private:
  bool chunked_;
  int64_t remaining_;  // -1: until the connection closes
  const std::function<void(std::string_view)>& out_;
  std::string buf_;
  uint64_t chunk_left_ = 0;
  bool need_crlf_ = false, in_trailer_ = false, done_ = false;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Result<HttpUrl> parse_http_url(const std::string& url, const std::string& field) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    return invalid_argument("{} '{}' must start with http:// (https is not supported)", field, url);
  }
  std::string rest = url.substr(scheme.size());
  HttpUrl u;
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) u.base_path = rest.substr(slash);
  while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  size_t colon = hostport.rfind(':');
  if (colon != std::string::npos && hostport.find(']') == std::string::npos) {
    u.host = hostport.substr(0, colon);
    u.port = hostport.substr(colon + 1);
    if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos || u.port.size() > 5 ||
        std::stoi(u.port) > 65535) {
      return invalid_argument("{} '{}': bad port '{}'", field, url, u.port);
    }
  } else {
    u.host = hostport;
  }
  if (u.host.size() > 2 && u.host.front() == '[' && u.host.back() == ']') u.host = u.host.substr(1, u.host.size() - 2);
  if (u.host.empty()) return invalid_argument("{} '{}' has no host", field, url);
  return u;
}

Result<int> http_call(const HttpUrl& url, const HttpRequest& req, const std::function<void(std::string_view)>& on_body) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &res);
  if (rc != 0) return io_error("cannot resolve {}: {}", url.host, gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, freeaddrinfo);
  Fd s;
  int err = 0;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    s.fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (s.fd < 0) continue;
    timeval tv{req.timeout_ms / 1000, (req.timeout_ms % 1000) * 1000};
    ::setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (::connect(s.fd, a->ai_addr, a->ai_addrlen) == 0) break;
    err = errno;
    ::close(s.fd);
    s.fd = -1;
  }
  if (s.fd < 0) return io_error("cannot connect to {}:{}: {}", url.host, url.port, std::strerror(err));

  std::string head = req.method + " " + url.base_path + req.path + " HTTP/1.1\r\nHost: " + url.host + ":" + url.port +
                     "\r\nConnection: close\r\nAccept: */*\r\n";
  if (!req.bearer_token.empty()) head += "Authorization: Bearer " + req.bearer_token + "\r\n";
  if (!req.body.empty() || req.method == "POST") {
    head += "Content-Type: application/json\r\nContent-Length: " + std::to_string(req.body.size()) + "\r\n";
  }
  head += "\r\n";
  head += req.body;
  for (size_t off = 0; off < head.size();) {
    ssize_t n = ::send(s.fd, head.data() + off, head.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return io_error("sending to {}:{}: {}", url.host, url.port, std::strerror(errno));
    off += static_cast<size_t>(n);
  }

  std::string buf;
  int status = 0;
  std::unique_ptr<BodyDecoder> body;
  char tmp[16384];
  for (;;) {
    ssize_t n = ::recv(s.fd, tmp, sizeof(tmp), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return io_error("no data from the server for {} ms", req.timeout_ms);
      return io_error("reading from {}:{}: {}", url.host, url.port, std::strerror(errno));
    }
    if (n == 0) {
      if (body && (body->done() || body->until_close())) return status;
      return io_error("the server closed the connection mid-response");
    }
    if (body) {
      if (!body->feed(std::string_view(tmp, static_cast<size_t>(n)))) return io_error("malformed chunked body");
      if (body->done()) return status;
      continue;
    }
    buf.append(tmp, static_cast<size_t>(n));
    size_t end = buf.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (buf.size() > (1 << 20)) return io_error("response headers over 1 MiB");
      continue;
    }
    // Status line and headers.
    if (buf.compare(0, 5, "HTTP/") != 0 || buf.size() < 12) return io_error("not an HTTP response");
    status = std::atoi(buf.c_str() + 9);
    bool chunked = false;
    int64_t length = -1;
    size_t pos = buf.find("\r\n") + 2;
    while (pos < end) {
      size_t eol = buf.find("\r\n", pos);
      std::string line = buf.substr(pos, eol - pos);
      pos = eol + 2;
      size_t c = line.find(':');
      if (c == std::string::npos) continue;
      std::string name = lower(line.substr(0, c));
      std::string value = line.substr(c + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      if (name == "transfer-encoding" && lower(value).find("chunked") != std::string::npos) chunked = true;
      if (name == "content-length") length = std::atoll(value.c_str());
    }
    if (req.method == "HEAD" || status == 204 || status == 304) return status;
    body = std::make_unique<BodyDecoder>(chunked, chunked ? -1 : length, on_body);
    std::string rest = buf.substr(end + 4);
    buf.clear();
    if (length == 0 && !chunked) return status;
    if (!body->feed(rest)) return io_error("malformed chunked body");
    if (body->done()) return status;
  }
}

}  // namespace hz::bench
