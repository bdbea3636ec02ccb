// KvStore: the disk tier's storage — one preallocated data file (blocks.dat) of fixed-size slots,
// each holding one checksummed block record (compressed payloads are variable within the slot), read
// through a memory mapping, plus the crash-safe StoreIndex (index.log) and a hotness policy that
// picks the slot to reuse when the budget is full. Single-threaded (the engine thread).
//
// Faults never fail a request: a record whose checksum, fingerprint or hash does not match is
// dropped (the caller recomputes the block); a write error (ENOSPC, EIO) logs one warning, counts
// an I/O error and turns the store read-only ("degraded"), so the engine continues RAM-only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kvstore/block_codec.h"
#include "kvstore/hotness_policy.h"
#include "kvstore/record.h"
#include "kvstore/store_index.h"

namespace hz::kvstore {

struct StoreOptions {
  std::string dir;
  uint64_t budget_bytes = 0;   // data file size limit (slots = budget / slot_bytes)
  Fingerprint fingerprint;
  uint32_t block_tokens = 0;
  uint64_t block_bytes = 0;    // raw payload bytes of one block
  Codec codec = Codec::kNone;
  int level = 1;               // zstd level, or lz4 acceleration
  std::string policy = "lru";  // see hotness_policy.h
};

struct StoreStats {
  uint64_t slots_total = 0;
  uint64_t blocks = 0;           // records in the index
  uint64_t bytes_used = 0;       // blocks * slot bytes
  uint64_t payload_bytes = 0;    // stored (compressed) payload bytes of those records
  uint64_t hits = 0;             // get() that returned a block
  uint64_t misses = 0;
  uint64_t writes = 0;           // records written
  uint64_t evictions = 0;        // records dropped for room
  uint64_t checksum_failures = 0;
  uint64_t io_errors = 0;
  uint64_t read_bytes = 0;       // record bytes read through the mapping
  uint64_t write_bytes = 0;      // record bytes written
  uint64_t raw_read_bytes = 0;   // decoded payload bytes
  uint64_t raw_write_bytes = 0;  // payload bytes before compression
  double read_seconds = 0, write_seconds = 0;  // time in get() / put() (decode, encode, I/O)
  bool degraded = false;
  bool fingerprint_reset = false;  // the store on disk had another fingerprint and was cleared
  bool repaired = false;           // the index had a torn tail, cut on open
};

// Test hook for I/O faults: called before each write-side operation ("grow", "write", "index");
// an error is treated as that operation failing with it.
using IoFault = std::function<Status(const char* op)>;

class KvStore {
 public:
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // Opens or creates the store in opts.dir (created if missing). A store written with another
  // fingerprint or geometry is cleared (warned). Fails when the folder is unusable or locked by
  // another process; the caller then runs without a disk tier.
  static Result<std::unique_ptr<KvStore>> open(const StoreOptions& opts);

  const StoreOptions& options() const { return opts_; }
  uint64_t hash_seed() const { return header_.hash_seed; }
  uint64_t slot_bytes() const { return slot_bytes_; }

  bool contains(uint64_t hash) const { return entries_.count(hash) != 0; }
  // The entry of `hash`, or null.
  const IndexEntry* find(uint64_t hash) const;
  // Reads and verifies the record of `hash`: its token ids must equal `tokens` (block_tokens of
  // them) and its payload decodes into `out` (block_bytes). kNotFound when absent; kDataLoss when
  // the record is torn or corrupt (it is dropped from the index).
  Status get(uint64_t hash, const int32_t* tokens, uint8_t* out);
  // Writes a block (no-op when `hash` is already stored or the store is degraded). Evicts the
  // coldest record when full. Errors degrade the store (and are returned for the caller's count).
  Status put(uint64_t hash, uint64_t parent, uint8_t kv_type, const int32_t* tokens, const uint8_t* raw);
  // Makes everything written durable (data, then index) and compacts a long log.
  Status sync();
  // Entries in index order (oldest write first).
  std::vector<IndexEntry> entries() const;

  StoreStats stats() const;
  bool degraded() const { return degraded_; }
  void set_io_fault(IoFault f) { fault_ = std::move(f); }
  StoreIndex& index() { return index_; }

 private:
  KvStore() = default;
  Status init(const StoreOptions& opts);
  Status fault(const char* op) const { return fault_ ? fault_(op) : Status(); }
  Status grow(uint64_t slots);
  Status remap();
  void drop(uint64_t hash, bool log_it);
  void degrade(const Status& why);

  StoreOptions opts_;
  IndexHeader header_;
  StoreIndex index_;
  std::unique_ptr<HotnessPolicy> policy_;
  uint64_t slot_bytes_ = 0;
  uint64_t num_slots_ = 0;     // budget
  uint64_t file_slots_ = 0;    // slots the data file holds now
  int data_fd_ = -1;
  int lock_fd_ = -1;
  uint8_t* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  std::unordered_map<uint64_t, IndexEntry> entries_;
  std::vector<uint32_t> free_slots_;
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> record_;
  bool degraded_ = false;
  bool dirty_ = false;
  StoreStats stats_;
  IoFault fault_;
};

// Paths of a store's files.
std::string store_index_path(const std::string& dir);
std::string store_data_path(const std::string& dir);
// Removes a store's files (horizon kv clear). Missing files are fine.
Status clear_store(const std::string& dir);

}  // namespace hz::kvstore
