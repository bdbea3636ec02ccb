// RedisStore: the remote KV tier's storage — block records (kvstore/record.h, checksummed) in a Redis
// shared by replicas, named by fingerprint + keyed chain key and authenticated by a MAC (both keyed
// by the replicas' shared secret, kvstore/record_mac.h). Eviction is Redis's (maxmemory +
// allkeys-lru); an optional TTL per record.
//
// Faults never fail a request: every Redis call has a timeout; an error or timeout drops that
// connection and marks the store degraded (one warning per outage, counted), lookups then miss at
// once and writes are dropped (counted) until a background thread has reconnected (every
// reconnect interval). A record whose MAC, checksum, fingerprint, name, tokens or size does not
// match is never used (counted as corrupt). Writes go through a bounded queue to that background
// thread, so the caller never waits for Redis; a full queue drops the write (counted).
//
// Threads: fetch() is for one thread (the engine's, which owns the read connection); enqueue(),
// stats() and degraded() from any thread; the writer/reconnect thread is internal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "kvstore/block_codec.h"
#include "kvstore/record.h"
#include "kvstore/record_mac.h"

struct redisContext;

namespace hz::kvstore {

// Where Redis is: redis://[user:pass@]host[:port][/db] or unix://path[?db=N].
struct RedisAddress {
  bool unix_socket = false;
  std::string host;  // TCP
  int port = 6379;
  std::string path;  // unix socket
  std::string user, password;
  int db = 0;
  std::string display() const;  // without the password
};
// Errors name `flag` (e.g. --kv-remote).
Result<RedisAddress> parse_redis_url(std::string_view url, std::string_view flag = "--kv-remote");

// One connection, authenticated and on its database; every call on it times out after `timeout`.
// Null with *err set when Redis cannot be reached or refuses.
struct RedisContextDeleter {
  void operator()(redisContext* c) const;
};
using RedisConnection = std::unique_ptr<redisContext, RedisContextDeleter>;
RedisConnection redis_connect(const RedisAddress& a, std::chrono::milliseconds timeout, std::string* err);

// What `horizon kv stats --kv-remote URL` shows: the server's memory and the tier's records by
// fingerprint (one SCAN of the tier's keys; value sizes from STRLEN, Redis's own memory per record
// from MEMORY USAGE on a sample).
struct RemoteSummary {
  uint64_t used_memory = 0, maxmemory = 0;
  std::string policy;         // maxmemory-policy
  uint64_t keys_total = 0;    // DBSIZE: every key of the database
  struct Group {
    std::string fingerprint;  // hex
    uint64_t records = 0;
    uint64_t value_bytes = 0;
    uint64_t sampled = 0, sampled_memory = 0;  // MEMORY USAGE of `sampled` records
  };
  std::vector<Group> groups;
};
Result<RemoteSummary> summarize_remote(const RedisAddress& a, std::chrono::milliseconds timeout);

struct RemoteOptions {
  std::string url;                  // --kv-remote
  std::string secret;               // --kv-remote-secret / HORIZON_KV_REMOTE_SECRET
  Fingerprint fingerprint;          // names the model, tokenizer, KV layout and types, backend
  uint32_t block_tokens = 0;
  uint64_t block_bytes = 0;         // raw payload bytes of one block
  uint8_t kv_type = 0;              // hz::KvType of payloads
  int32_t timeout_ms = 100;         // every Redis call
  int32_t reconnect_ms = 1000;      // between reconnect attempts while degraded
  uint64_t queue_bytes = uint64_t{256} << 20;  // write-behind queue bound
  int32_t ttl_s = 0;                // 0: records live until Redis evicts them
  // Payload compression (by the writer thread; a reader decodes any codec). NOTE: zstd saves only
  // 3-18% of KV bytes, but that is what brings a value under the allocator size class it would
  // otherwise just exceed (a 2^k-byte block plus header), which saves ~20% of Redis memory.
  Codec codec = Codec::kNone;
  int32_t level = 1;
};

struct RemoteStats {
  uint64_t hits = 0;            // records fetched and used
  uint64_t misses = 0;          // lookups that found no record (a chain's end)
  uint64_t read_bytes = 0;      // value bytes received
  uint64_t write_bytes = 0;     // value bytes sent
  uint64_t writes = 0;          // records written
  uint64_t dropped_writes = 0;  // writes not made: queue full, degraded, or failed
  uint64_t errors = 0;          // failed or timed-out Redis calls (connection and reply errors)
  uint64_t corrupt = 0;         // records refused: MAC, checksum, fingerprint, name, tokens or size
  uint64_t reconnects = 0;      // connections re-established after an outage
  uint64_t fetches = 0;         // fetch() calls that asked Redis
  double fetch_seconds = 0;     // time spent in them (network, verification)
  uint64_t queued_bytes = 0;    // now in the write-behind queue
  uint64_t epoch = 0;           // +1 per outage that ended: what was written before may be gone
  bool degraded = false;
};

class RedisStore {
 public:
  // Parses the URL (errors name --kv-remote) and starts the writer thread. Redis being unreachable
  // now is not an error: the store starts degraded and keeps trying.
  static Result<std::unique_ptr<RedisStore>> open(const RemoteOptions& o);
  ~RedisStore();  // writes what is queued (bounded by the timeouts), then stops the thread
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  const RemoteOptions& options() const { return opts_; }
  const RedisAddress& address() const { return addr_; }
  // Key of a full block after `parent` (all zero for block 0).
  ChainKey chain_key(const ChainKey& parent, const int32_t* tokens) const;
  // The Redis key of a block.
  std::string name(const ChainKey& key) const;

  // Fetches the records of `keys` in order, pipelined, until the first that is missing or unusable,
  // or `deadline`. Block i's token ids are tokens_of(i) (block_tokens of them); each verified
  // payload (block_bytes) goes to accept(i, payload), which returns false to stop. Returns the
  // number accepted. Never blocks past the deadline by more than one call's timeout.
  int32_t fetch(const std::vector<ChainKey>& keys, const std::function<const int32_t*(int32_t)>& tokens_of,
                const std::function<bool(int32_t, const uint8_t*)>& accept,
                std::chrono::steady_clock::time_point deadline);
  // Queues a block for writing (copies it); false (counted as dropped) when degraded or full.
  bool enqueue(const ChainKey& key, const ChainKey& parent, const int32_t* tokens, const uint8_t* raw);
  // Waits until the queue is empty or `timeout` passed (tests, shutdown). True when empty.
  bool flush(std::chrono::milliseconds timeout);

  RemoteStats stats() const;
  bool degraded() const { return stats().degraded; }

 private:
  struct Item {
    ChainKey key, parent;
    std::vector<uint8_t> data;  // token ids (block_tokens * 4 bytes), then the raw block
  };
  RedisStore() = default;
  void run();                       // the writer / reconnect thread
  bool write_batch(std::vector<Item>& batch);
  void reconnect_reader();
  void note_failure(const char* what, const std::string& why, bool reader);
  void reconnect();                 // what is down, once (writer thread)
  bool verify(const ChainKey& key, const std::string& name, const uint8_t* v, size_t len, const int32_t* tokens,
              const uint8_t** payload);

  RemoteOptions opts_;
  RedisAddress addr_;
  std::unique_ptr<RecordKeys> keys_;
  std::string prefix_;              // "hz:kv:<fingerprint>:"
  std::chrono::milliseconds timeout_{100};

  RedisConnection reader_;          // the fetching thread's
  RedisConnection writer_;          // the writer thread's
  std::atomic<bool> read_down_{true}, write_down_{true};
  std::vector<uint8_t> scratch_;    // a decompressed payload (fetching thread)
  std::vector<uint8_t> packed_;     // a compressed payload (writer thread)

  mutable std::mutex mu_;           // guards everything below
  std::condition_variable cv_, drained_cv_;
  std::deque<Item> queue_;
  uint64_t queued_bytes_ = 0;
  bool writing_ = false;            // the writer holds a batch outside the queue
  RedisConnection fresh_reader_;    // connected by the writer thread for the fetching thread
  bool stop_ = false;
  bool warned_ = false;             // this outage was announced
  bool refusal_warned_ = false;     // Redis refusing writes (full) was announced
  RemoteStats stats_;
  std::thread thread_;
};

}  // namespace hz::kvstore
