#include "kvstore/store_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"
#include "kvstore/byte_io.h"

namespace hz::kvstore {

namespace {

constexpr uint32_t kIndexMagic = 0x494b5a48;  // "HZKI"
constexpr uint16_t kIndexVersion = 1;
constexpr uint8_t kOpPut = 1, kOpDel = 2;
constexpr size_t kPutBody = 38, kDelBody = 8;
// Record framing: body_len u32, op u8, body, checksum u64 = XXH3-64 of (body_len, op, body).
constexpr size_t kFrame = 4 + 1 + 8;

std::vector<uint8_t> frame(uint8_t op, const uint8_t* body, size_t len) {
  std::vector<uint8_t> r(kFrame + len);
  put<uint32_t>(r.data(), 0, static_cast<uint32_t>(len));
  r[4] = op;
  std::memcpy(r.data() + 5, body, len);
  put<uint64_t>(r.data(), 5 + len, XXH3_64bits(r.data(), 5 + len));
  return r;
}

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& what) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("{}: write: {}", what, std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status();
}

std::string dir_of(const std::string& path) {
  size_t s = path.find_last_of('/');
  return s == std::string::npos ? "." : path.substr(0, s);
}

}  // namespace

void encode_index_header(const IndexHeader& h, uint8_t out[kIndexHeaderBytes]) {
  put<uint32_t>(out, 0, kIndexMagic);
  put<uint16_t>(out, 4, kIndexVersion);
  put<uint16_t>(out, 6, 0);
  put<uint64_t>(out, 8, h.fingerprint.lo);
  put<uint64_t>(out, 16, h.fingerprint.hi);
  put<uint64_t>(out, 24, h.hash_seed);
  put<uint64_t>(out, 32, h.slot_bytes);
  put<uint64_t>(out, 40, XXH3_64bits(out, 40));
}

std::vector<uint8_t> encode_put_record(const IndexEntry& e) {
  uint8_t b[kPutBody];
  put<uint64_t>(b, 0, e.hash);
  put<uint64_t>(b, 8, e.parent);
  put<uint32_t>(b, 16, e.slot);
  b[20] = e.kv_type;
  b[21] = e.codec;
  put<uint32_t>(b, 22, e.token_count);
  put<uint32_t>(b, 26, e.payload_len);
  put<uint64_t>(b, 30, e.record_checksum);
  return frame(kOpPut, b, sizeof(b));
}

std::vector<uint8_t> encode_del_record(uint64_t hash) {
  uint8_t b[kDelBody];
  put<uint64_t>(b, 0, hash);
  return frame(kOpDel, b, sizeof(b));
}

Result<IndexReplay> replay_index(const uint8_t* data, size_t size) {
  if (size < kIndexHeaderBytes) return data_loss("index: {} bytes, shorter than its header", size);
  if (get<uint32_t>(data, 0) != kIndexMagic) return data_loss("index: bad magic");
  if (get<uint16_t>(data, 4) != kIndexVersion) return data_loss("index: version {} is not {}", get<uint16_t>(data, 4), kIndexVersion);
  if (get<uint64_t>(data, 40) != XXH3_64bits(data, 40)) return data_loss("index: header checksum mismatch");
  IndexReplay r;
  r.header.fingerprint.lo = get<uint64_t>(data, 8);
  r.header.fingerprint.hi = get<uint64_t>(data, 16);
  r.header.hash_seed = get<uint64_t>(data, 24);
  r.header.slot_bytes = get<uint64_t>(data, 32);
  // Live entries by hash; `order` keeps write order so replaying a log preserves recency.
  std::unordered_map<uint64_t, size_t> pos;
  std::vector<IndexEntry> order;
  std::vector<uint8_t> alive;
  size_t off = kIndexHeaderBytes;
  for (;;) {
    if (size - off < kFrame) break;
    const uint32_t len = get<uint32_t>(data, off);
    if (len > size - off - kFrame) break;  // incomplete
    const uint8_t op = data[off + 4];
    if (get<uint64_t>(data, off + 5 + len) != XXH3_64bits(data + off, 5 + len)) break;
    const uint8_t* b = data + off + 5;
    if (op == kOpPut && len == kPutBody) {
      IndexEntry e;
      e.hash = get<uint64_t>(b, 0);
      e.parent = get<uint64_t>(b, 8);
      e.slot = get<uint32_t>(b, 16);
      e.kv_type = b[20];
      e.codec = b[21];
      e.token_count = get<uint32_t>(b, 22);
      e.payload_len = get<uint32_t>(b, 26);
      e.record_checksum = get<uint64_t>(b, 30);
      auto it = pos.find(e.hash);
      if (it != pos.end()) alive[it->second] = 0;
      pos[e.hash] = order.size();
      order.push_back(e);
      alive.push_back(1);
    } else if (op == kOpDel && len == kDelBody) {
      auto it = pos.find(get<uint64_t>(b, 0));
      if (it != pos.end()) {
        alive[it->second] = 0;
        pos.erase(it);
      }
    } else {
      break;  // a checksummed record of an unknown kind: a newer writer; stop trusting the rest
    }
    off += kFrame + len;
    ++r.num_records;
  }
  r.valid_bytes = off;
  r.torn_tail = off != size;
  for (size_t i = 0; i < order.size(); ++i) {
    if (alive[i] != 0) r.entries.push_back(order[i]);
  }
  return r;
}

StoreIndex::~StoreIndex() {
  if (fd_ >= 0) ::close(fd_);
}

StoreIndex::StoreIndex(StoreIndex&& o) noexcept { *this = std::move(o); }

StoreIndex& StoreIndex::operator=(StoreIndex&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    o.fd_ = -1;
    header_ = o.header_;
    replayed_ = std::move(o.replayed_);
    repaired_ = o.repaired_;
    log_bytes_ = o.log_bytes_;
    num_records_ = o.num_records_;
    failpoint_ = std::move(o.failpoint_);
  }
  return *this;
}

Result<StoreIndex> StoreIndex::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found("{}: no index", path);
    return io_error("{}: open: {}", path, std::strerror(errno));
  }
  StoreIndex ix;
  ix.path_ = path;
  ix.fd_ = fd;
  struct stat st;
  if (::fstat(fd, &st) != 0) return io_error("{}: stat: {}", path, std::strerror(errno));
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t r = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return io_error("{}: read: {}", path, r < 0 ? std::strerror(errno) : "short read");
    got += static_cast<size_t>(r);
  }
  auto rep = replay_index(buf.data(), buf.size());
  if (!rep.ok()) return rep.status().with_context(path);
  ix.header_ = rep->header;
  ix.replayed_ = std::move(rep->entries);
  ix.num_records_ = rep->num_records;
  ix.log_bytes_ = rep->valid_bytes;
  if (rep->torn_tail) {
    // Cut the torn tail so later appends follow the last complete record.
    if (::ftruncate(fd, static_cast<off_t>(rep->valid_bytes)) != 0) return io_error("{}: truncate: {}", path, std::strerror(errno));
    if (::fdatasync(fd) != 0) return io_error("{}: fsync: {}", path, std::strerror(errno));
    ix.repaired_ = true;
  }
  if (::lseek(fd, static_cast<off_t>(ix.log_bytes_), SEEK_SET) < 0) return io_error("{}: seek: {}", path, std::strerror(errno));
  return ix;
}

Result<StoreIndex> StoreIndex::create(const std::string& path, const IndexHeader& header) {
  StoreIndex ix;
  ix.path_ = path;
  ix.header_ = header;
  HZ_RETURN_IF_ERROR(ix.compact({}));
  return ix;
}

Status StoreIndex::append(uint8_t op, const uint8_t* body, size_t len) {
  HZ_CHECK(fd_ >= 0);
  std::vector<uint8_t> r = frame(op, body, len);
  HZ_RETURN_IF_ERROR(fail("append.write"));
  // A failed or partial write leaves a torn record that the next open cuts; rewind our idea of the
  // end so the next append overwrites it instead of following garbage.
  Status s = write_all(fd_, r.data(), r.size(), path_);
  if (!s.ok()) {
    (void)::ftruncate(fd_, static_cast<off_t>(log_bytes_));
    (void)::lseek(fd_, static_cast<off_t>(log_bytes_), SEEK_SET);
    return s;
  }
  log_bytes_ += r.size();
  ++num_records_;
  return Status();
}

Status StoreIndex::put(const IndexEntry& e) {
  std::vector<uint8_t> r = encode_put_record(e);
  return append(kOpPut, r.data() + 5, kPutBody);
}

Status StoreIndex::erase(uint64_t hash) {
  std::vector<uint8_t> r = encode_del_record(hash);
  return append(kOpDel, r.data() + 5, kDelBody);
}

Status StoreIndex::sync() {
  if (fd_ < 0) return Status();
  HZ_RETURN_IF_ERROR(fail("sync"));
  if (::fdatasync(fd_) != 0) return io_error("{}: fsync: {}", path_, std::strerror(errno));
  return Status();
}

Status StoreIndex::compact(const std::vector<IndexEntry>& live) {
  const std::string tmp = path_ + ".tmp";
  std::vector<uint8_t> img(kIndexHeaderBytes);
  encode_index_header(header_, img.data());
  for (const IndexEntry& e : live) {
    std::vector<uint8_t> r = encode_put_record(e);
    img.insert(img.end(), r.begin(), r.end());
  }
  HZ_RETURN_IF_ERROR(fail("compact.open_tmp"));
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("{}: create: {}", tmp, std::strerror(errno));
  auto close_fail = [&](Status s) {
    ::close(fd);
    return s;
  };
  // Two halves so the harness can stop between them (a torn temp file must never become the log).
  const size_t half = img.size() / 2;
  Status s = write_all(fd, img.data(), half, tmp);
  if (!s.ok()) return close_fail(s);
  if (Status f = fail("compact.write_tmp"); !f.ok()) return close_fail(f);
  s = write_all(fd, img.data() + half, img.size() - half, tmp);
  if (!s.ok()) return close_fail(s);
  if (Status f = fail("compact.fsync_tmp"); !f.ok()) return close_fail(f);
  if (::fsync(fd) != 0) return close_fail(io_error("{}: fsync: {}", tmp, std::strerror(errno)));
  if (Status f = fail("compact.rename"); !f.ok()) return close_fail(f);
  if (::rename(tmp.c_str(), path_.c_str()) != 0) return close_fail(io_error("rename {} -> {}: {}", tmp, path_, std::strerror(errno)));
  if (Status f = fail("compact.fsync_dir"); !f.ok()) return close_fail(f);
  (void)fsync_dir(dir_of(path_));
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  if (::lseek(fd_, 0, SEEK_END) < 0) return io_error("{}: seek: {}", path_, std::strerror(errno));
  log_bytes_ = img.size();
  num_records_ = live.size();
  return Status();
}

Status fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("{}: open: {}", dir, std::strerror(errno));
  int r = ::fsync(fd);
  ::close(fd);
  if (r != 0) return io_error("{}: fsync: {}", dir, std::strerror(errno));
  return Status();
}

}  // namespace hz::kvstore
