// `horizon kv ls|stats|clear --kv-disk-dir DIR` and `horizon kv stats --kv-remote URL`: inspect and manage a KV disk tier store without
// an engine. Read-only except clear; never repairs (the engine does that when it opens the store).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <unordered_set>

#include <fmt/format.h>

#include "base/mapped_file.h"
#include "base/byte_size.h"
#include "kvstore/kv_store.h"
#include "kvstore/redis_store.h"
#include "kv/kv_layout.h"
#include "tools/cli.h"

namespace hz::cli {
namespace {

struct KvFlags {
  std::string dir;
  std::string remote;
  int64_t limit = 50;
  bool verify = false;
};

std::string type_name(uint8_t t) {
  const auto pair = kv_type_pair_from_code(t);
  return pair ? kv_type_pair_name(*pair) : fmt::format("type{}", t);
}
std::string codec_label(uint8_t c) {
  return c <= 2 ? kvstore::codec_name(static_cast<kvstore::Codec>(c)) : fmt::format("codec{}", c);
}

Result<kvstore::IndexReplay> load(const std::string& dir) {
  const std::string p = kvstore::store_index_path(dir);
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return not_found("{}: no KV store here (no index.log)", dir);
  if (st.st_size == 0) return data_loss("{}: empty index", p);
  HZ_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(p));
  auto r = kvstore::replay_index(f.data(), f.size());
  if (!r.ok()) return r.status().with_context(p);
  return r;
}

int ls(const KvFlags& f) {
  auto r = load(f.dir);
  if (!r.ok()) return fail(r.status().message());
  std::printf("fingerprint %s  slot %llu bytes  %zu blocks%s\n", r->header.fingerprint.hex().c_str(),
              static_cast<unsigned long long>(r->header.slot_bytes), r->entries.size(),
              r->torn_tail ? "  (torn index tail: cut at next open)" : "");
  std::printf("%-16s %-16s %8s %-5s %-5s %7s %9s\n", "hash", "parent", "slot", "type", "codec", "tokens", "payload");
  int64_t n = 0;
  for (const auto& e : r->entries) {
    if (f.limit > 0 && n++ >= f.limit) {
      std::printf("... %zu more (--limit 0 lists all)\n", r->entries.size() - static_cast<size_t>(f.limit));
      break;
    }
    std::printf("%016llx %016llx %8u %-5s %-5s %7u %9u\n", static_cast<unsigned long long>(e.hash),
                static_cast<unsigned long long>(e.parent), e.slot, type_name(e.kv_type).c_str(), codec_label(e.codec).c_str(),
                e.token_count, e.payload_len);
  }
  return 0;
}

int stats(const KvFlags& f) {
  auto r = load(f.dir);
  if (!r.ok()) return fail(r.status().message());
  const std::string data = kvstore::store_data_path(f.dir);
  struct stat st {};
  const bool has_data = ::stat(data.c_str(), &st) == 0;
  uint64_t payload = 0, tokens = 0, roots = 0;
  std::map<std::string, uint64_t> by_type, by_codec;
  std::unordered_set<uint64_t> hashes;
  for (const auto& e : r->entries) hashes.insert(e.hash);
  for (const auto& e : r->entries) {
    payload += e.payload_len;
    tokens += e.token_count;
    ++by_type[type_name(e.kv_type)];
    ++by_codec[codec_label(e.codec)];
    if (e.parent == 0 || hashes.count(e.parent) == 0) ++roots;
  }
  const uint64_t slot = r->header.slot_bytes;
  const uint64_t raw = slot > 0 ? r->entries.size() * slot : 0;
  std::printf("store        %s\n", f.dir.c_str());
  std::printf("fingerprint  %s\n", r->header.fingerprint.hex().c_str());
  std::printf("blocks       %zu (%llu tokens, %llu chain starts)\n", r->entries.size(), static_cast<unsigned long long>(tokens),
              static_cast<unsigned long long>(roots));
  std::printf("data file    %.1f MiB on disk, %llu slots of %llu bytes\n", has_data ? st.st_blocks * 512.0 / (1 << 20) : 0.0,
              static_cast<unsigned long long>(has_data && slot > 0 ? static_cast<uint64_t>(st.st_size) / slot : 0),
              static_cast<unsigned long long>(slot));
  std::printf("payload      %.2f MiB stored (%.1f%% of the slots' %.2f MiB)\n", payload / 1048576.0,
              raw > 0 ? 100.0 * payload / raw : 0.0, raw / 1048576.0);
  for (const auto& [t, n] : by_type) std::printf("type         %s: %llu blocks\n", t.c_str(), static_cast<unsigned long long>(n));
  for (const auto& [c, n] : by_codec) std::printf("codec        %s: %llu blocks\n", c.c_str(), static_cast<unsigned long long>(n));
  std::printf("index        %llu bytes, %llu records%s\n", static_cast<unsigned long long>(r->valid_bytes),
              static_cast<unsigned long long>(r->num_records), r->torn_tail ? ", torn tail (cut at next open)" : "");
  if (f.verify && has_data && slot > 0) {
    auto m = MappedFile::open(data);
    if (!m.ok()) return fail(m.status().message());
    uint64_t bad = 0;
    for (const auto& e : r->entries) {
      const uint64_t off = static_cast<uint64_t>(e.slot) * slot;
      Status s;
      if (off + slot > m->size()) {
        s = data_loss("slot {} is beyond the end of the data file", e.slot);
      } else {
        auto rec = kvstore::parse_record(m->data() + off, slot, r->header.fingerprint);
        if (!rec.ok()) s = rec.status();
        else if (rec->meta.block_hash != e.hash || rec->meta.checksum != e.record_checksum) s = data_loss("slot holds another block");
      }
      if (!s.ok()) {
        ++bad;
        std::printf("bad          %016llx (slot %u): %s\n", static_cast<unsigned long long>(e.hash), e.slot, s.message().c_str());
      }
    }
    std::printf("verified     %zu records, %llu bad (dropped and recomputed when the engine meets them)\n",
                r->entries.size(), static_cast<unsigned long long>(bad));
  }
  return 0;
}

// The remote tier: Redis's memory and the tier's records per fingerprint (no secret needed: names
// carry the fingerprint in clear; contents are not read).
int remote_stats(const KvFlags& f) {
  auto addr = kvstore::parse_redis_url(f.remote);
  if (!addr.ok()) return fail(addr.status().message());
  auto s = kvstore::summarize_remote(*addr, std::chrono::milliseconds(2000));
  if (!s.ok()) return fail(s.status().message());
  std::printf("redis        %s\n", addr->display().c_str());
  std::printf("memory       %s used of maxmemory %s (policy %s)%s\n", format_bytes(s->used_memory).c_str(),
              s->maxmemory == 0 ? "unlimited" : format_bytes(s->maxmemory).c_str(), s->policy.c_str(),
              s->maxmemory == 0 || s->policy.find("lru") == std::string::npos
                  ? "  (set maxmemory and allkeys-lru so Redis evicts old prefixes)"
                  : "");
  uint64_t records = 0;
  for (const auto& g : s->groups) records += g.records;
  std::printf("keys         %llu in the database, %llu KV records\n", static_cast<unsigned long long>(s->keys_total),
              static_cast<unsigned long long>(records));
  for (const auto& g : s->groups) {
    std::printf("fingerprint  %s: %llu records, %s of values (%llu bytes each), %llu bytes of Redis memory each\n",
                g.fingerprint.c_str(), static_cast<unsigned long long>(g.records), format_bytes(g.value_bytes).c_str(),
                static_cast<unsigned long long>(g.records ? g.value_bytes / g.records : 0),
                static_cast<unsigned long long>(g.sampled ? g.sampled_memory / g.sampled : 0));
  }
  return 0;
}

int clear(const KvFlags& f) {
  const std::string lock = f.dir + "/lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    const bool busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
    if (busy) {
      ::close(fd);
      return fail(f.dir + " is in use by a running engine; stop it first");
    }
    Status s = kvstore::clear_store(f.dir);
    ::unlink(lock.c_str());
    ::close(fd);
    if (!s.ok()) return fail(s.message());
  } else {
    Status s = kvstore::clear_store(f.dir);
    if (!s.ok()) return fail(s.message());
  }
  std::printf("cleared %s\n", f.dir.c_str());
  return 0;
}

Subcommand kKv("kv", "Inspect and manage a KV disk tier store (--kv-disk-dir) or a remote tier (stats --kv-remote)", [](CLI::App& app) {
  app.require_subcommand(1);
  auto f = std::make_shared<KvFlags>();
  auto which = std::make_shared<int>(0);
  CLI::App* l = app.add_subcommand("ls", "List the blocks of a store");
  CLI::App* s = app.add_subcommand("stats", "Totals of a store (--verify checks every record's checksum)");
  CLI::App* c = app.add_subcommand("clear", "Remove a store's files");
  for (CLI::App* sub : {l, c}) sub->add_option("--kv-disk-dir", f->dir, "The store's folder")->required();
  s->add_option("--kv-disk-dir", f->dir, "The store's folder");
  s->add_option("--kv-remote", f->remote, "Instead: a remote tier's Redis, redis://[user:pass@]host:port[/db] or unix://path");
  l->add_option("--limit", f->limit, "Blocks listed at most (0 = all)");
  s->add_flag("--verify", f->verify, "Read every record and check it");
  l->callback([which] { *which = 1; });
  s->callback([which] { *which = 2; });
  c->callback([which] { *which = 3; });
  return [f, which]() -> int {
    switch (*which) {
      case 1: return ls(*f);
      case 2:
        if (f->dir.empty() == f->remote.empty()) return fail("kv stats: give one of --kv-disk-dir DIR, --kv-remote URL");
        return f->remote.empty() ? stats(*f) : remote_stats(*f);
      case 3: return clear(*f);
    }
    return fail("give one of ls, stats, clear");
  };
});

}  // namespace
}  // namespace hz::cli
