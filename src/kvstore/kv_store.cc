#include "kvstore/kv_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

#include "base/check.h"
#include "base/log.h"

namespace hz::kvstore {

namespace {

constexpr uint64_t kExtentBytes = uint64_t{64} << 20;  // the data file grows (preallocated) by this much

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status pwrite_all(int fd, const uint8_t* p, size_t n, uint64_t off) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("write: {}", std::strerror(errno));
    }
    p += w;
    off += static_cast<uint64_t>(w);
    n -= static_cast<size_t>(w);
  }
  return Status();
}

}  // namespace

std::string store_index_path(const std::string& dir) { return dir + "/index.log"; }
std::string store_data_path(const std::string& dir) { return dir + "/blocks.dat"; }

Status clear_store(const std::string& dir) {
  for (const std::string& p : {store_index_path(dir), store_index_path(dir) + ".tmp", store_data_path(dir)}) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) return io_error("{}: remove: {}", p, std::strerror(errno));
  }
  return Status();
}

KvStore::~KvStore() {
  if (data_fd_ >= 0 && !degraded_) {
    Status s = sync();
    if (!s.ok()) HZ_LOG_WARN("KV disk tier {}: final sync failed: {}", opts_.dir, s.message());
  }
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (data_fd_ >= 0) ::close(data_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<std::unique_ptr<KvStore>> KvStore::open(const StoreOptions& opts) {
  std::unique_ptr<KvStore> s(new KvStore());
  HZ_RETURN_IF_ERROR(s->init(opts));
  return s;
}

Status KvStore::init(const StoreOptions& opts) {
  opts_ = opts;
  if (opts.dir.empty()) return invalid_argument("--kv-disk-dir is empty");
  if (opts.block_tokens == 0 || opts.block_bytes == 0) return invalid_argument("KV store: empty block geometry");
  std::error_code ec;
  std::filesystem::create_directories(opts.dir, ec);  // with its parents, as mkdir -p
  if (ec) return io_error("--kv-disk-dir {}: {}", opts.dir, ec.message());
  // One process per store: a second engine on the same folder would reuse slots under the first.
  const std::string lock = opts.dir + "/lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return io_error("{}: {}", lock, std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) return io_error("--kv-disk-dir {} is in use by another process", opts.dir);

  slot_bytes_ = (record_bytes(opts.block_tokens, 0) + opts.block_bytes + 63) / 64 * 64;
  num_slots_ = std::min<uint64_t>(opts.budget_bytes / slot_bytes_, UINT32_MAX);
  if (num_slots_ == 0)
    return out_of_range("--kv-disk-budget {} bytes holds no KV block (one takes {} bytes)", opts.budget_bytes, slot_bytes_);
  HZ_ASSIGN_OR_RETURN(policy_, make_policy(opts.policy, "--kv-disk-policy"));

  IndexHeader want;
  want.fingerprint = opts.fingerprint;
  want.slot_bytes = slot_bytes_;
  const std::string ipath = store_index_path(opts.dir), dpath = store_data_path(opts.dir);
  auto ix = StoreIndex::open(ipath);
  bool reset = false;
  if (!ix.ok()) {
    if (ix.status().code() != StatusCode::kNotFound) {
      if (ix.status().code() != StatusCode::kDataLoss) return ix.status();
      HZ_LOG_WARN("KV disk tier {}: {}; starting an empty store", opts.dir, ix.status().message());
    }
    reset = true;
  } else if (ix->header().fingerprint != opts.fingerprint || ix->header().slot_bytes != slot_bytes_) {
    // KV of another model, tokenizer, RoPE, KV type or block size: never served, so drop it.
    HZ_LOG_WARN("KV disk tier {}: the store holds KV of another model or configuration (fingerprint {}, ours {}); clearing it",
                opts.dir, ix->header().fingerprint.hex(), opts.fingerprint.hex());
    stats_.fingerprint_reset = true;
    reset = true;
  }
  if (reset) {
    if (::truncate(dpath.c_str(), 0) != 0 && errno != ENOENT) return io_error("{}: truncate: {}", dpath, std::strerror(errno));
    std::random_device rd;
    want.hash_seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    HZ_ASSIGN_OR_RETURN(index_, StoreIndex::create(ipath, want));
  } else {
    index_ = std::move(*ix);
    stats_.repaired = index_.repaired();
  }
  header_ = index_.header();

  data_fd_ = ::open(dpath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (data_fd_ < 0) return io_error("{}: {}", dpath, std::strerror(errno));
  struct stat st;
  if (::fstat(data_fd_, &st) != 0) return io_error("{}: stat: {}", dpath, std::strerror(errno));
  file_slots_ = static_cast<uint64_t>(st.st_size) / slot_bytes_;
  if (file_slots_ > num_slots_) {  // the budget shrank: slots beyond it go
    file_slots_ = num_slots_;
    if (::ftruncate(data_fd_, static_cast<off_t>(file_slots_ * slot_bytes_)) != 0)
      return io_error("{}: truncate: {}", dpath, std::strerror(errno));
  }

  // Adopt the replayed entries that still make sense; a slot claimed twice keeps its newest claim.
  std::vector<IndexEntry> live;
  std::unordered_map<uint32_t, uint64_t> slot_owner;
  bool dropped = index_.repaired();
  for (const IndexEntry& e : index_.replayed()) {
    if (e.slot >= file_slots_ || e.token_count != opts.block_tokens) {
      dropped = true;
      continue;
    }
    auto it = slot_owner.find(e.slot);
    if (it != slot_owner.end()) {
      entries_.erase(it->second);
      dropped = true;
    }
    slot_owner[e.slot] = e.hash;
    entries_[e.hash] = e;
  }
  for (const IndexEntry& e : index_.replayed()) {
    auto it = entries_.find(e.hash);
    if (it != entries_.end() && it->second.slot == e.slot) {
      policy_->touch(e.hash);
      live.push_back(e);
      stats_.payload_bytes += e.payload_len;
    }
  }
  if (dropped) HZ_RETURN_IF_ERROR(index_.compact(live));
  for (uint64_t s = file_slots_; s-- > 0;) {
    if (slot_owner.count(static_cast<uint32_t>(s)) == 0) free_slots_.push_back(static_cast<uint32_t>(s));
  }
  return remap();
}

Status KvStore::remap() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = file_slots_ * slot_bytes_;
  if (map_bytes_ == 0) return Status();
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, data_fd_, 0);
  if (p == MAP_FAILED) {
    map_bytes_ = 0;
    return io_error("{}: mmap: {}", store_data_path(opts_.dir), std::strerror(errno));
  }
  map_ = static_cast<uint8_t*>(p);
  return Status();
}

Status KvStore::grow(uint64_t slots) {
  const uint64_t extent = std::max<uint64_t>(1, kExtentBytes / slot_bytes_);
  const uint64_t target = std::min(num_slots_, file_slots_ + std::max(slots, extent));
  if (target <= file_slots_) return out_of_range("no slot left");
  HZ_RETURN_IF_ERROR(fault("grow"));
  // Preallocate: running out of space shows up here, as an error, never as SIGBUS on the mapping.
  int r = ::posix_fallocate(data_fd_, static_cast<off_t>(file_slots_ * slot_bytes_),
                            static_cast<off_t>((target - file_slots_) * slot_bytes_));
  if (r != 0) {
    (void)::ftruncate(data_fd_, static_cast<off_t>(file_slots_ * slot_bytes_));
    return io_error("{}: preallocate: {}", store_data_path(opts_.dir), std::strerror(r));
  }
  for (uint64_t s = target; s-- > file_slots_;) free_slots_.push_back(static_cast<uint32_t>(s));
  file_slots_ = target;
  return remap();
}

const IndexEntry* KvStore::find(uint64_t hash) const {
  auto it = entries_.find(hash);
  return it == entries_.end() ? nullptr : &it->second;
}

void KvStore::drop(uint64_t hash, bool log_it) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return;
  free_slots_.push_back(it->second.slot);
  stats_.payload_bytes -= it->second.payload_len;
  entries_.erase(it);
  policy_->erase(hash);
  if (log_it && !degraded_) {
    Status s = fault("index");
    if (s.ok()) s = index_.erase(hash);
    if (!s.ok()) degrade(s);
    dirty_ = true;
  }
}

void KvStore::degrade(const Status& why) {
  ++stats_.io_errors;
  if (degraded_) return;
  degraded_ = true;
  HZ_LOG_WARN("KV disk tier {}: {}; continuing with the RAM tier only", opts_.dir, why.message());
}

Status KvStore::get(uint64_t hash, const int32_t* tokens, uint8_t* out) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) {
    ++stats_.misses;
    return not_found("block {:016x} is not on disk", hash);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const IndexEntry e = it->second;
  const uint64_t off = static_cast<uint64_t>(e.slot) * slot_bytes_;
  Status bad;
  auto rec = parse_record(map_ + off, slot_bytes_, opts_.fingerprint);
  if (!rec.ok()) {
    bad = rec.status();
  } else if (rec->meta.block_hash != hash || rec->meta.checksum != e.record_checksum) {
    bad = data_loss("record: slot {} holds another block", e.slot);
  } else if (rec->meta.token_count != opts_.block_tokens || rec->meta.raw_len != opts_.block_bytes) {
    bad = data_loss("record: geometry {} tokens / {} bytes is not the store's", rec->meta.token_count, rec->meta.raw_len);
  } else if (std::memcmp(rec->tokens, tokens, 4 * static_cast<size_t>(opts_.block_tokens)) != 0) {
    bad = data_loss("record: token ids differ from the prompt's (hash collision)");
  } else {
    bad = decompress(rec->meta.codec, rec->payload, rec->meta.payload_len, out, opts_.block_bytes);
  }
  if (!bad.ok()) {
    ++stats_.checksum_failures;
    ++stats_.misses;
    HZ_LOG_WARN("KV disk tier {}: dropping block {:016x} (slot {}): {}", opts_.dir, hash, e.slot, bad.message());
    drop(hash, true);
    return bad;
  }
  ++stats_.hits;
  stats_.read_bytes += record_bytes(rec->meta.token_count, rec->meta.payload_len);
  stats_.raw_read_bytes += opts_.block_bytes;
  stats_.read_seconds += seconds_since(t0);
  policy_->touch(hash);
  return Status();
}

Status KvStore::put(uint64_t hash, uint64_t parent, uint8_t kv_type, const int32_t* tokens, const uint8_t* raw) {
  if (contains(hash)) {
    policy_->touch(hash);
    return Status();
  }
  if (degraded_) return Status();
  const auto t0 = std::chrono::steady_clock::now();
  RecordMeta m;
  m.fingerprint = opts_.fingerprint;
  m.block_hash = hash;
  m.parent_hash = parent;
  m.kv_type = kv_type;
  m.token_count = opts_.block_tokens;
  m.raw_len = opts_.block_bytes;
  m.codec = compress(opts_.codec, opts_.level, raw, opts_.block_bytes, &scratch_);
  m.payload_len = static_cast<uint32_t>(scratch_.size());
  const size_t len = record_bytes(m.token_count, m.payload_len);
  HZ_CHECK(len <= slot_bytes_);
  record_.resize(len);
  const uint64_t sum = write_record(m, tokens, scratch_.data(), record_.data());

  if (free_slots_.empty()) {
    if (file_slots_ < num_slots_) {
      if (Status s = grow(1); !s.ok()) {
        degrade(s);
        return s;
      }
    } else {
      auto victim = policy_->coldest();
      HZ_CHECK(victim.has_value());
      ++stats_.evictions;
      drop(*victim, true);  // logged before the slot is overwritten
      if (degraded_) return io_error("index update failed");
    }
  }
  const uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  Status s = fault("write");
  if (s.ok()) s = pwrite_all(data_fd_, record_.data(), len, static_cast<uint64_t>(slot) * slot_bytes_);
  IndexEntry e;
  e.hash = hash;
  e.parent = parent;
  e.slot = slot;
  e.kv_type = kv_type;
  e.codec = static_cast<uint8_t>(m.codec);
  e.token_count = m.token_count;
  e.payload_len = m.payload_len;
  e.record_checksum = sum;
  if (s.ok()) s = fault("index");
  if (s.ok()) s = index_.put(e);
  if (!s.ok()) {
    free_slots_.push_back(slot);
    degrade(s);
    return s;
  }
  entries_[hash] = e;
  policy_->touch(hash);
  dirty_ = true;
  ++stats_.writes;
  stats_.write_bytes += len;
  stats_.raw_write_bytes += opts_.block_bytes;
  stats_.payload_bytes += m.payload_len;
  stats_.write_seconds += seconds_since(t0);
  return Status();
}

Status KvStore::sync() {
  if (!dirty_ || degraded_) return Status();
  Status s;
  // Data before index: an index record never points at data that is not on disk yet (and if it
  // did, the record checksum would catch it).
  if (::fdatasync(data_fd_) != 0) s = io_error("{}: fsync: {}", store_data_path(opts_.dir), std::strerror(errno));
  if (s.ok()) s = index_.sync();
  if (s.ok() && index_.num_records() > 2 * entries_.size() + 1024) s = index_.compact(entries());
  if (!s.ok()) {
    degrade(s);
    return s;
  }
  dirty_ = false;
  return Status();
}

std::vector<IndexEntry> KvStore::entries() const {
  std::vector<IndexEntry> v;
  v.reserve(entries_.size());
  for (const auto& [h, e] : entries_) v.push_back(e);
  std::sort(v.begin(), v.end(), [](const IndexEntry& a, const IndexEntry& b) { return a.slot < b.slot; });
  return v;
}

StoreStats KvStore::stats() const {
  StoreStats s = stats_;
  s.slots_total = num_slots_;
  s.blocks = entries_.size();
  s.bytes_used = entries_.size() * slot_bytes_;
  s.degraded = degraded_;
  return s;
}

}  // namespace hz::kvstore
