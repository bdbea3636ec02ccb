#include "kvstore/redis_store.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>

#include "base/check.h"
#include "base/log.h"
#include "kvstore/block_codec.h"

namespace hz::kvstore {

namespace {

using Clock = std::chrono::steady_clock;

timeval to_timeval(std::chrono::milliseconds ms) {
  const int64_t v = std::max<int64_t>(1, ms.count());
  timeval tv;
  tv.tv_sec = static_cast<time_t>(v / 1000);
  tv.tv_usec = static_cast<suseconds_t>((v % 1000) * 1000);
  return tv;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

std::string reply_error(redisContext* c, const redisReply* r) {
  if (r == nullptr) return c->errstr[0] != '\0' ? std::string(c->errstr) : "no reply";
  if (r->type == REDIS_REPLY_ERROR) return std::string(r->str, r->len);
  return "unexpected reply";
}

bool parse_int(std::string_view s, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

// ---- Addresses and connections.

std::string RedisAddress::display() const {
  std::string who = user.empty() ? "" : user + "@";
  if (unix_socket) return "unix://" + who + path + (db != 0 ? "?db=" + std::to_string(db) : "");
  return "redis://" + who + host + ":" + std::to_string(port) + (db != 0 ? "/" + std::to_string(db) : "");
}

Result<RedisAddress> parse_redis_url(std::string_view url, std::string_view flag) {
  RedisAddress a;
  std::string_view rest;
  if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else if (url.starts_with("unix://")) {
    a.unix_socket = true;
    rest = url.substr(7);
  } else {
    return invalid_argument("{} '{}': expected redis://[user:pass@]host:port[/db] or unix://path", flag, url);
  }
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = cred.find(':');
    if (colon == std::string_view::npos) {
      a.password = std::string(cred);  // redis://pass@host (the default user)
    } else {
      a.user = std::string(cred.substr(0, colon));
      a.password = std::string(cred.substr(colon + 1));
    }
  }
  if (a.unix_socket) {
    if (const size_t q = rest.find("?db="); q != std::string_view::npos) {
      if (!parse_int(rest.substr(q + 4), &a.db) || a.db < 0)
        return invalid_argument("{}: database '{}' is not a number", flag, rest.substr(q + 4));
      rest = rest.substr(0, q);
    }
    if (rest.empty() || rest[0] != '/') return invalid_argument("{} '{}': a unix socket needs an absolute path", flag, url);
    a.path = std::string(rest);
    return a;
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!parse_int(db, &a.db) || a.db < 0))
      return invalid_argument("{}: database '{}' is not a number", flag, db);
    rest = rest.substr(0, slash);
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos && rest.find(']') == std::string_view::npos) {
    if (!parse_int(rest.substr(colon + 1), &a.port) || a.port < 1 || a.port > 65535)
      return invalid_argument("{}: port '{}' is not in 1..65535", flag, rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return invalid_argument("{} '{}': no host", flag, url);
  a.host = std::string(rest);
  return a;
}

void RedisContextDeleter::operator()(redisContext* c) const { redisFree(c); }

RedisConnection redis_connect(const RedisAddress& a, std::chrono::milliseconds timeout, std::string* err) {
  const timeval tv = to_timeval(timeout);
  RedisConnection c(a.unix_socket ? redisConnectUnixWithTimeout(a.path.c_str(), tv)
                                  : redisConnectWithTimeout(a.host.c_str(), a.port, tv));
  if (!c || c->err != 0) {
    *err = c ? c->errstr : "cannot allocate a connection";
    return nullptr;
  }
  if (redisSetTimeout(c.get(), tv) != REDIS_OK) {
    *err = "cannot set the socket timeout";
    return nullptr;
  }
  if (!a.password.empty()) {
    Reply r(static_cast<redisReply*>(a.user.empty() ? redisCommand(c.get(), "AUTH %s", a.password.c_str())
                                                    : redisCommand(c.get(), "AUTH %s %s", a.user.c_str(), a.password.c_str())));
    if (!r || r->type == REDIS_REPLY_ERROR) {
      *err = "AUTH: " + reply_error(c.get(), r.get());
      return nullptr;
    }
  }
  if (a.db != 0) {
    Reply r(static_cast<redisReply*>(redisCommand(c.get(), "SELECT %d", a.db)));
    if (!r || r->type == REDIS_REPLY_ERROR) {
      *err = "SELECT: " + reply_error(c.get(), r.get());
      return nullptr;
    }
  }
  // A frozen server accepts TCP connections (the kernel does) but answers nothing: ask it.
  Reply r(static_cast<redisReply*>(redisCommand(c.get(), "PING")));
  if (!r || r->type == REDIS_REPLY_ERROR) {
    *err = "PING: " + reply_error(c.get(), r.get());
    return nullptr;
  }
  return c;
}

Result<RemoteSummary> summarize_remote(const RedisAddress& a, std::chrono::milliseconds timeout) {
  std::string err;
  RedisConnection c = redis_connect(a, timeout, &err);
  if (!c) return io_error("--kv-remote {}: {}", a.display(), err);
  auto cmd = [&](const char* f) { return Reply(static_cast<redisReply*>(redisCommand(c.get(), f))); };
  RemoteSummary s;
  auto info_field = [](const std::string& info, const std::string& key) -> std::string {
    const size_t p = info.find("\n" + key + ":");
    if (p == std::string::npos) return "";
    const size_t b = p + key.size() + 2;
    return info.substr(b, info.find_first_of("\r\n", b) - b);
  };
  if (Reply r = cmd("INFO memory"); r && r->type == REDIS_REPLY_STRING) {
    const std::string info = "\n" + std::string(r->str, r->len);
    s.used_memory = std::strtoull(info_field(info, "used_memory").c_str(), nullptr, 10);
    s.maxmemory = std::strtoull(info_field(info, "maxmemory").c_str(), nullptr, 10);
    s.policy = info_field(info, "maxmemory_policy");
  } else {
    return io_error("--kv-remote {}: INFO: {}", a.display(), reply_error(c.get(), r.get()));
  }
  if (Reply r = cmd("DBSIZE"); r && r->type == REDIS_REPLY_INTEGER) s.keys_total = static_cast<uint64_t>(r->integer);
  std::map<std::string, RemoteSummary::Group> groups;
  std::string cursor = "0";
  constexpr uint64_t kSample = 64;
  do {
    Reply r(static_cast<redisReply*>(redisCommand(c.get(), "SCAN %s MATCH hz:kv:* COUNT 1000", cursor.c_str())));
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
      return io_error("--kv-remote {}: SCAN: {}", a.display(), reply_error(c.get(), r.get()));
    cursor = std::string(r->element[0]->str, r->element[0]->len);
    const redisReply* keys = r->element[1];
    std::vector<std::string> names;
    for (size_t i = 0; i < keys->elements; ++i) names.emplace_back(keys->element[i]->str, keys->element[i]->len);
    std::vector<bool> sample(names.size());
    std::map<std::string, uint64_t> pending;  // samples asked for in this batch, per fingerprint
    for (size_t i = 0; i < names.size(); ++i) {
      redisAppendCommand(c.get(), "STRLEN %b", names[i].data(), names[i].size());
      const std::string fp = names[i].substr(6, 32);
      sample[i] = groups[fp].sampled + pending[fp] < kSample;
      if (sample[i]) {
        ++pending[fp];
        redisAppendCommand(c.get(), "MEMORY USAGE %b", names[i].data(), names[i].size());
      }
    }
    for (size_t i = 0; i < names.size(); ++i) {
      RemoteSummary::Group& g = groups[names[i].substr(6, 32)];
      g.fingerprint = names[i].substr(6, 32);
      for (int k = 0; k < (sample[i] ? 2 : 1); ++k) {
        void* raw = nullptr;
        if (redisGetReply(c.get(), &raw) != REDIS_OK) return io_error("--kv-remote {}: {}", a.display(), c->errstr);
        Reply x(static_cast<redisReply*>(raw));
        if (x->type != REDIS_REPLY_INTEGER) continue;
        if (k == 0) {
          ++g.records;
          g.value_bytes += static_cast<uint64_t>(x->integer);
        } else {
          ++g.sampled;
          g.sampled_memory += static_cast<uint64_t>(x->integer);
        }
      }
    }
  } while (cursor != "0");
  for (auto& [fp, g] : groups) s.groups.push_back(g);
  return s;
}

// ---- The store.

Result<std::unique_ptr<RedisStore>> RedisStore::open(const RemoteOptions& o) {
  HZ_ASSIGN_OR_RETURN(RedisAddress addr, parse_redis_url(o.url));
  if (o.secret.empty()) return invalid_argument("--kv-remote needs a secret shared by the replicas: --kv-remote-secret or HORIZON_KV_REMOTE_SECRET");
  if (o.timeout_ms < 1) return invalid_argument("--kv-remote-timeout must be at least 1 ms");
  HZ_CHECK(o.block_tokens > 0 && o.block_bytes > 0);
  std::unique_ptr<RedisStore> s(new RedisStore());
  s->opts_ = o;
  s->addr_ = std::move(addr);
  s->keys_ = std::make_unique<RecordKeys>(o.secret);
  s->opts_.secret.clear();  // the derived keys are all it needs
  s->prefix_ = "hz:kv:" + o.fingerprint.hex() + ":";
  s->timeout_ = std::chrono::milliseconds(o.timeout_ms);
  std::string err;
  s->reader_ = redis_connect(s->addr_, s->timeout_, &err);
  if (s->reader_) {
    s->read_down_ = false;
  } else {
    s->note_failure("connect", err, /*reader=*/true);
  }
  if (s->reader_) s->writer_ = redis_connect(s->addr_, s->timeout_, &err);
  s->write_down_ = !s->writer_;
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

RedisStore::~RedisStore() {
  (void)flush(std::chrono::milliseconds(std::max(1000, 4 * opts_.timeout_ms)));
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ChainKey RedisStore::chain_key(const ChainKey& parent, const int32_t* tokens) const {
  return keys_->chain_key(opts_.fingerprint, parent, tokens, opts_.block_tokens);
}

std::string RedisStore::name(const ChainKey& key) const { return prefix_ + chain_key_hex(key); }

void RedisStore::note_failure(const char* what, const std::string& why, bool reader) {
  (reader ? read_down_ : write_down_) = true;
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.errors;
  if (!warned_) {
    warned_ = true;
    HZ_LOG_WARN("KV remote tier {} degraded ({}: {}); requests recompute their prefixes, reconnecting every {} ms",
                addr_.display(), what, why, opts_.reconnect_ms);
  }
}

bool RedisStore::verify(const ChainKey& key, const std::string& nm, const uint8_t* v, size_t len, const int32_t* tokens,
                        const uint8_t** payload) {
  // The MAC first: nothing of a record is trusted (not even its sizes) before it.
  if (len < kRecordHeaderBytes + kMacBytes) return false;
  const size_t rec_len = len - kMacBytes;
  if (!keys_->verify(nm, v, rec_len, v + rec_len)) return false;
  auto rec = parse_record(v, rec_len, opts_.fingerprint);
  if (!rec.ok()) return false;
  const RecordMeta& m = rec->meta;
  if (m.block_hash != chain_key_u64(key) || m.token_count != opts_.block_tokens || m.kv_type != opts_.kv_type ||
      m.raw_len != opts_.block_bytes || record_bytes(m.token_count, m.payload_len) != rec_len)
    return false;
  if (std::memcmp(rec->tokens, tokens, 4 * static_cast<size_t>(opts_.block_tokens)) != 0) return false;
  if (m.codec == Codec::kNone) {
    *payload = rec->payload;
    return true;
  }
  scratch_.resize(opts_.block_bytes);
  if (!decompress(m.codec, rec->payload, m.payload_len, scratch_.data(), scratch_.size()).ok()) return false;
  *payload = scratch_.data();
  return true;
}

void RedisStore::reconnect_reader() {
  std::lock_guard<std::mutex> lk(mu_);
  if (fresh_reader_) {
    reader_ = std::move(fresh_reader_);
    read_down_ = false;
  }
}

int32_t RedisStore::fetch(const std::vector<ChainKey>& keys, const std::function<const int32_t*(int32_t)>& tokens_of,
                          const std::function<bool(int32_t, const uint8_t*)>& accept, Clock::time_point deadline) {
  if (read_down_) reconnect_reader();
  if (read_down_ || keys.empty()) return 0;
  const auto t0 = Clock::now();
  // Small batches: a chain usually ends early (the first miss), and a batch is what a deadline
  // can interrupt without waiting for more than one reply's timeout.
  constexpr size_t kBatch = 16;
  int32_t used = 0;
  uint64_t read_bytes = 0, hits = 0, misses = 0, corrupt = 0;
  bool stop = false;
  std::string failure;
  for (size_t first = 0; first < keys.size() && !stop; first += kBatch) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    redisContext* c = reader_.get();
    redisSetTimeout(c, to_timeval(std::min(left, timeout_)));
    const size_t n = std::min(kBatch, keys.size() - first);
    std::vector<std::string> names(n);
    for (size_t i = 0; i < n; ++i) {
      names[i] = name(keys[first + i]);
      redisAppendCommand(c, "GET %b", names[i].data(), names[i].size());
    }
    // Every reply of the batch is read, so the connection stays in step, even after a stop.
    for (size_t i = 0; i < n; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) {
        failure = c->errstr;
        stop = true;
        break;
      }
      Reply r(static_cast<redisReply*>(raw));
      if (stop) continue;
      if (r->type == REDIS_REPLY_NIL) {
        ++misses;
        stop = true;
        continue;
      }
      if (r->type != REDIS_REPLY_STRING) {
        failure = reply_error(c, r.get());
        stop = true;
        continue;
      }
      read_bytes += r->len;
      const int32_t idx = static_cast<int32_t>(first + i);
      const uint8_t* payload = nullptr;
      if (!verify(keys[idx], names[i], reinterpret_cast<const uint8_t*>(r->str), r->len, tokens_of(idx), &payload)) {
        ++corrupt;
        stop = true;
        continue;
      }
      if (!accept(idx, payload)) {
        stop = true;
        continue;
      }
      ++hits;
      ++used;
    }
    if (!failure.empty() || reader_->err != 0) break;
  }
  const bool broken = !failure.empty() || reader_->err != 0;
  if (broken) {
    reader_.reset();
    note_failure("GET", failure.empty() ? "connection error" : failure, /*reader=*/true);
  }
  std::lock_guard<std::mutex> lk(mu_);
  stats_.hits += hits;
  stats_.misses += misses;
  stats_.corrupt += corrupt;
  stats_.read_bytes += read_bytes;
  ++stats_.fetches;
  stats_.fetch_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  return used;
}

bool RedisStore::enqueue(const ChainKey& key, const ChainKey& parent, const int32_t* tokens, const uint8_t* raw) {
  const size_t tok_bytes = 4 * static_cast<size_t>(opts_.block_tokens);
  const uint64_t bytes = tok_bytes + opts_.block_bytes;
  std::lock_guard<std::mutex> lk(mu_);
  if (write_down_ || queued_bytes_ + bytes > opts_.queue_bytes || stop_) {
    ++stats_.dropped_writes;
    return false;
  }
  Item it;
  it.key = key;
  it.parent = parent;
  it.data.resize(bytes);
  std::memcpy(it.data.data(), tokens, tok_bytes);
  std::memcpy(it.data.data() + tok_bytes, raw, opts_.block_bytes);
  queue_.push_back(std::move(it));
  queued_bytes_ += bytes;
  cv_.notify_one();
  return true;
}

bool RedisStore::flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  return drained_cv_.wait_for(lk, timeout, [&] { return (queue_.empty() && !writing_) || stop_; });
}

bool RedisStore::write_batch(std::vector<Item>& batch) {
  redisContext* c = writer_.get();
  const size_t tok_bytes = 4 * static_cast<size_t>(opts_.block_tokens);
  uint64_t bytes = 0;
  std::vector<std::string> names(batch.size());
  std::vector<std::string> values(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const Item& it = batch[i];
    RecordMeta m;
    m.fingerprint = opts_.fingerprint;
    m.block_hash = chain_key_u64(it.key);
    m.parent_hash = chain_key_u64(it.parent);
    m.kv_type = opts_.kv_type;
    const uint8_t* payload = it.data.data() + tok_bytes;
    m.codec = Codec::kNone;
    if (opts_.codec != Codec::kNone) {
      m.codec = compress(opts_.codec, opts_.level, payload, opts_.block_bytes, &packed_);
      if (m.codec != Codec::kNone) payload = packed_.data();
    }
    m.token_count = opts_.block_tokens;
    m.payload_len = static_cast<uint32_t>(m.codec == Codec::kNone ? opts_.block_bytes : packed_.size());
    m.raw_len = opts_.block_bytes;
    const size_t rec_len = record_bytes(m.token_count, m.payload_len);
    std::string& v = values[i];
    v.resize(rec_len + kMacBytes);
    uint8_t* out = reinterpret_cast<uint8_t*>(v.data());
    write_record(m, reinterpret_cast<const int32_t*>(it.data.data()), payload, out);
    names[i] = name(it.key);
    const Mac mac = keys_->mac(names[i], out, rec_len);
    std::memcpy(out + rec_len, mac.data(), kMacBytes);
    if (opts_.ttl_s > 0) {
      redisAppendCommand(c, "SET %b %b EX %d", names[i].data(), names[i].size(), v.data(), v.size(), opts_.ttl_s);
    } else {
      redisAppendCommand(c, "SET %b %b", names[i].data(), names[i].size(), v.data(), v.size());
    }
    bytes += v.size();
  }
  uint64_t written = 0, refused = 0;
  std::string failure, refusal;
  for (size_t i = 0; i < batch.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK) {
      failure = c->errstr;
      break;
    }
    Reply r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) {  // e.g. OOM with maxmemory and a noeviction policy
      ++refused;
      refusal = std::string(r->str, r->len);
    } else {
      ++written;
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  stats_.writes += written;
  stats_.write_bytes += written == batch.size() ? bytes : written * (bytes / std::max<size_t>(1, batch.size()));
  stats_.dropped_writes += batch.size() - written;
  if (refused > 0) {
    stats_.errors += refused;
    if (!refusal_warned_)  // once until a batch goes through again
      HZ_LOG_WARN("KV remote tier {}: Redis refuses writes ({}); they are dropped and counted", addr_.display(), refusal);
    refusal_warned_ = true;
  } else if (written > 0) {
    refusal_warned_ = false;
  }
  if (!failure.empty()) {
    write_down_ = true;
    ++stats_.errors;
    if (!warned_) {
      warned_ = true;
      HZ_LOG_WARN("KV remote tier {} degraded (SET: {}); requests recompute their prefixes, reconnecting every {} ms",
                  addr_.display(), failure, opts_.reconnect_ms);
    }
    return false;
  }
  return true;
}

void RedisStore::reconnect() {
  std::string err;
  bool reader_wanted;
  {
    std::lock_guard<std::mutex> lk(mu_);
    reader_wanted = read_down_ && !fresh_reader_;
  }
  if (write_down_) {
    writer_ = redis_connect(addr_, timeout_, &err);
    if (writer_) write_down_ = false;
  }
  if (reader_wanted && err.empty()) {
    RedisConnection c = redis_connect(addr_, timeout_, &err);
    std::lock_guard<std::mutex> lk(mu_);
    if (c) fresh_reader_ = std::move(c);
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (!err.empty()) {
    HZ_LOG_DEBUG("KV remote tier {}: reconnect failed: {}", addr_.display(), err);
    return;
  }
  if (warned_) {
    warned_ = false;
    ++stats_.reconnects;
    ++stats_.epoch;
    HZ_LOG_INFO("KV remote tier {} is back", addr_.display());
  }
}

void RedisStore::run() {
  constexpr size_t kBatchItems = 8;
  auto last_attempt = Clock::now() - std::chrono::hours(1);
  const auto interval = std::chrono::milliseconds(std::max(1, opts_.reconnect_ms));
  for (;;) {
    // Reconnect what is down, at most once per interval (never on the engine thread).
    bool down;
    {
      std::lock_guard<std::mutex> lk(mu_);
      down = write_down_ || (read_down_ && !fresh_reader_);
    }
    if (down && Clock::now() - last_attempt >= interval) {
      last_attempt = Clock::now();
      reconnect();
    }
    std::vector<Item> batch;
    {
      std::unique_lock<std::mutex> lk(mu_);
      down = write_down_ || (read_down_ && !fresh_reader_);
      const auto wait = down ? std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                          last_attempt + interval - Clock::now()))
                             : std::chrono::milliseconds(1000);
      cv_.wait_for(lk, wait, [&] { return stop_ || (!queue_.empty() && !write_down_); });
      if (write_down_ && !queue_.empty()) {
        // Writes queued when the connection broke: dropped (counted); the next requests write again.
        stats_.dropped_writes += queue_.size();
        queue_.clear();
        queued_bytes_ = 0;
        drained_cv_.notify_all();
      }
      if (stop_ && queue_.empty()) break;
      while (!write_down_ && !queue_.empty() && batch.size() < kBatchItems) {
        queued_bytes_ -= queue_.front().data.size();
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      writing_ = !batch.empty();
    }
    if (!batch.empty()) {
      if (!write_batch(batch)) writer_.reset();
      std::lock_guard<std::mutex> lk(mu_);
      writing_ = false;
      if (queue_.empty()) drained_cv_.notify_all();
    }
  }
}

RemoteStats RedisStore::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  RemoteStats s = stats_;
  s.queued_bytes = queued_bytes_;
  s.degraded = write_down_.load() || (read_down_.load() && !fresh_reader_);
  return s;
}

}  // namespace hz::kvstore
