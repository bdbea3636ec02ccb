// StoreIndex: the crash-safe index of the disk tier (block hash -> slot, KV type, tokens, parent).
// An append-only log (index.log) of checksummed PUT/DEL records after a checksummed header; a
// torn or corrupt tail is cut off at the last complete record on open. Compaction writes the live
// entries to index.log.tmp, fsyncs it, renames it over index.log and fsyncs the folder, so a crash
// at any point leaves either the old or the new log, both complete.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kvstore/record.h"

namespace hz::kvstore {

struct IndexHeader {
  Fingerprint fingerprint;
  uint64_t hash_seed = 0;   // keyed-hash seed of the block chain (random per store, secret)
  uint64_t slot_bytes = 0;  // geometry of blocks.dat
};

struct IndexEntry {
  uint64_t hash = 0;
  uint64_t parent = 0;
  uint32_t slot = 0;
  uint8_t kv_type = 0;
  uint8_t codec = 0;
  uint32_t token_count = 0;
  uint32_t payload_len = 0;
  uint64_t record_checksum = 0;  // the slot's record must carry this checksum
};

inline constexpr size_t kIndexHeaderBytes = 48;

// Result of reading a log image (no I/O: the fuzzer and `horizon kv` use it directly).
struct IndexReplay {
  IndexHeader header;
  std::vector<IndexEntry> entries;  // live entries, in the order they were last written
  uint64_t valid_bytes = 0;         // the complete prefix of the log
  uint64_t num_records = 0;         // complete records read (PUT and DEL)
  bool torn_tail = false;           // bytes after valid_bytes were dropped
};
// Errors only when the header itself is missing or corrupt (the log is then unusable).
Result<IndexReplay> replay_index(const uint8_t* data, size_t size);

class StoreIndex {
 public:
  // Test hook: called before each step of a log update or compaction with the step's name; an error
  // aborts the operation right there, as a crash would (nothing after the step runs).
  using Failpoint = std::function<Status(const char* step)>;

  StoreIndex() = default;
  ~StoreIndex();
  StoreIndex(StoreIndex&& o) noexcept;
  StoreIndex& operator=(StoreIndex&& o) noexcept;

  // Opens `path`, replaying it and cutting a torn tail. Returns kNotFound when it does not exist.
  static Result<StoreIndex> open(const std::string& path);
  // Creates (or replaces, crash-safely) the log at `path` with `header` and no entries.
  static Result<StoreIndex> create(const std::string& path, const IndexHeader& header);

  const IndexHeader& header() const { return header_; }
  const std::vector<IndexEntry>& replayed() const { return replayed_; }  // entries found on open
  bool repaired() const { return repaired_; }  // open cut a torn tail
  uint64_t log_bytes() const { return log_bytes_; }
  uint64_t num_records() const { return num_records_; }

  Status put(const IndexEntry& e);
  Status erase(uint64_t hash);
  // Makes appended records durable (fdatasync).
  Status sync();
  // Rewrites the log as exactly `live` (crash-safe, see above).
  Status compact(const std::vector<IndexEntry>& live);

  void set_failpoint(Failpoint f) { failpoint_ = std::move(f); }

 private:
  Status append(uint8_t op, const uint8_t* body, size_t len);
  Status fail(const char* step) const { return failpoint_ ? failpoint_(step) : Status(); }

  std::string path_;
  int fd_ = -1;
  IndexHeader header_;
  std::vector<IndexEntry> replayed_;
  bool repaired_ = false;
  uint64_t log_bytes_ = 0;
  uint64_t num_records_ = 0;
  Failpoint failpoint_;
};

// Encodes a header or an entry (exposed for tests and the fuzzer's seed corpus).
void encode_index_header(const IndexHeader& h, uint8_t out[kIndexHeaderBytes]);
std::vector<uint8_t> encode_put_record(const IndexEntry& e);
std::vector<uint8_t> encode_del_record(uint64_t hash);

// fsync of a folder (after a rename in it). Best effort on file systems that refuse it.
Status fsync_dir(const std::string& dir);

}  // namespace hz::kvstore
