// KvStore: put/get round trips per codec, persistence across reopen, fingerprint isolation,
// corrupt and truncated records (detected, dropped, never served), I/O faults (degrade, no
// failure), eviction by the hotness policy when the budget is full.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "kvstore/kv_store.h"
#include "support/test_support.h"

namespace hz::kvstore {
namespace {

constexpr uint32_t kTokens = 16;
constexpr uint64_t kBlockBytes = 8192;

StoreOptions options(const std::string& dir, uint64_t budget_blocks = 64, Codec codec = Codec::kZstd) {
  StoreOptions o;
  o.dir = dir;
  o.fingerprint = {0xabc, 0xdef};
  o.block_tokens = kTokens;
  o.block_bytes = kBlockBytes;
  o.codec = codec;
  // Slot = header + token ids + payload, rounded to 64 bytes.
  o.budget_bytes = budget_blocks * ((64 + 4 * kTokens + kBlockBytes + 63) / 64 * 64);
  return o;
}

// A block that compresses somewhat, like f16 KV (random mantissas, repetitive exponents), with a
// zero tail (unwritten rows) so that lz4, which has no entropy coder, finds something too.
std::vector<uint8_t> block(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> b(kBlockBytes);
  for (size_t i = 0; i < b.size() * 3 / 4; i += 2) {
    b[i] = static_cast<uint8_t>(rng());
    b[i + 1] = static_cast<uint8_t>(0x38 + (rng() & 3));
  }
  return b;
}
std::vector<int32_t> tokens(uint64_t seed) {
  std::vector<int32_t> t(kTokens);
  for (uint32_t i = 0; i < kTokens; ++i) t[i] = static_cast<int32_t>(seed * 100 + i);
  return t;
}

void put_block(KvStore& s, uint64_t h) {
  auto b = block(h);
  auto t = tokens(h);
  ASSERT_TRUE(s.put(h, h - 1, 1, t.data(), b.data()).ok());
}
bool get_block(KvStore& s, uint64_t h) {
  std::vector<uint8_t> out(kBlockBytes);
  auto t = tokens(h);
  if (!s.get(h, t.data(), out.data()).ok()) return false;
  EXPECT_EQ(out, block(h)) << "block " << h;
  return true;
}

TEST(KvStore, RoundTripEveryCodecAndReopen) {
  for (Codec c : {Codec::kNone, Codec::kZstd, Codec::kLz4}) {
    std::string dir = test::make_temp_dir("hz_store");
    {
      auto s = KvStore::open(options(dir, 64, c));
      ASSERT_TRUE(s.ok()) << s.status().message();
      for (uint64_t h = 1; h <= 10; ++h) put_block(**s, h);
      for (uint64_t h = 1; h <= 10; ++h) EXPECT_TRUE(get_block(**s, h)) << codec_name(c);
      EXPECT_EQ((*s)->stats().blocks, 10u);
      EXPECT_EQ((*s)->stats().hits, 10u);
      if (c != Codec::kNone) EXPECT_LT((*s)->stats().payload_bytes, 10 * kBlockBytes) << codec_name(c);
    }
    auto s = KvStore::open(options(dir, 64, Codec::kZstd));  // records keep their own codec
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)->stats().blocks, 10u);
    for (uint64_t h = 1; h <= 10; ++h) EXPECT_TRUE(get_block(**s, h)) << codec_name(c);
    EXPECT_FALSE((*s)->contains(11));
  }
}

TEST(KvStore, WrongTokensAreNotServed) {
  std::string dir = test::make_temp_dir("hz_store");
  auto s = KvStore::open(options(dir));
  ASSERT_TRUE(s.ok());
  put_block(**s, 5);
  std::vector<uint8_t> out(kBlockBytes);
  auto t = tokens(6);
  EXPECT_EQ((*s)->get(5, t.data(), out.data()).code(), StatusCode::kDataLoss);
  EXPECT_FALSE((*s)->contains(5));
}

TEST(KvStore, FingerprintMismatchNeverServes) {
  std::string dir = test::make_temp_dir("hz_store");
  {
    auto s = KvStore::open(options(dir));
    ASSERT_TRUE(s.ok());
    for (uint64_t h = 1; h <= 4; ++h) put_block(**s, h);
  }
  StoreOptions other = options(dir);
  other.fingerprint.lo ^= 1;  // e.g. another model or KV type
  {
    auto s = KvStore::open(other);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE((*s)->stats().fingerprint_reset);
    EXPECT_EQ((*s)->stats().blocks, 0u);
    for (uint64_t h = 1; h <= 4; ++h) EXPECT_FALSE(get_block(**s, h));
    put_block(**s, 7);
  }
  // Back to the first fingerprint: the store was cleared for the other one, nothing of it is served.
  auto s = KvStore::open(options(dir));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)->stats().fingerprint_reset);
  EXPECT_FALSE(get_block(**s, 7));
  EXPECT_FALSE(get_block(**s, 1));
}

TEST(KvStore, RecordWithForeignFingerprintIsRejected) {
  // Even if an index entry points at a record of another fingerprint (e.g. copied files), the
  // record's own fingerprint is checked.
  std::string dir = test::make_temp_dir("hz_store");
  std::string dir2 = test::make_temp_dir("hz_store");
  StoreOptions o2 = options(dir2);
  o2.fingerprint.hi ^= 1;
  {
    auto a = KvStore::open(options(dir));
    put_block(**a, 1);
    auto b = KvStore::open(o2);
    put_block(**b, 1);
  }
  ASSERT_EQ(0, test::run_command("cp " + dir2 + "/blocks.dat " + dir + "/blocks.dat"));
  auto s = KvStore::open(options(dir));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(get_block(**s, 1));
  EXPECT_EQ((*s)->stats().checksum_failures, 1u);
}

void flip_byte(const std::string& path, uint64_t off) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(off)), 1);
  b ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(off)), 1);
  ::close(fd);
}

TEST(KvStore, CorruptRecordIsDetectedDroppedAndNeverServed) {
  std::string dir = test::make_temp_dir("hz_store");
  uint64_t slot_bytes = 0;
  std::vector<IndexEntry> entries;
  {
    auto s = KvStore::open(options(dir));
    for (uint64_t h = 1; h <= 3; ++h) put_block(**s, h);
    slot_bytes = (*s)->slot_bytes();
    entries = (*s)->entries();
  }
  // Flip one byte in block 2's header, token ids and payload in turn.
  const IndexEntry& e2 = *std::find_if(entries.begin(), entries.end(), [](const IndexEntry& e) { return e.hash == 2; });
  for (uint64_t rel : {uint64_t{3}, uint64_t{30}, uint64_t{64 + 5}, uint64_t{64 + 4 * kTokens + 100}}) {
    std::string d = test::make_temp_dir("hz_store");
    ASSERT_EQ(0, test::run_command("cp " + dir + "/index.log " + dir + "/blocks.dat " + d + "/"));
    flip_byte(d + "/blocks.dat", e2.slot * slot_bytes + rel);
    auto s = KvStore::open(options(d));
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(get_block(**s, 1));
    EXPECT_FALSE(get_block(**s, 2)) << "flip at +" << rel;
    EXPECT_EQ((*s)->stats().checksum_failures, 1u);
    EXPECT_FALSE((*s)->contains(2));  // dropped: the caller recomputes it
    EXPECT_TRUE(get_block(**s, 3));
    put_block(**s, 2);  // recomputed and written again
    EXPECT_TRUE(get_block(**s, 2));
  }
}

TEST(KvStore, TruncatedDataFileIsDetected) {
  std::string dir = test::make_temp_dir("hz_store");
  uint64_t slot_bytes = 0;
  {
    auto s = KvStore::open(options(dir));
    for (uint64_t h = 1; h <= 3; ++h) put_block(**s, h);
    slot_bytes = (*s)->slot_bytes();
  }
  // Cut inside the third slot (a torn write at the end of the file): blocks 1, 2 survive.
  ASSERT_EQ(0, ::truncate((dir + "/blocks.dat").c_str(), static_cast<off_t>(2 * slot_bytes + 100)));
  auto s = KvStore::open(options(dir));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(get_block(**s, 1));
  EXPECT_TRUE(get_block(**s, 2));
  EXPECT_FALSE(get_block(**s, 3));
  EXPECT_FALSE((*s)->contains(3));
  // Zeroed (hole) slot: a record that was indexed but never reached the disk.
  put_block(**s, 3);
  std::vector<IndexEntry> es = (*s)->entries();
  s->reset();
  const IndexEntry& e3 = *std::find_if(es.begin(), es.end(), [](const IndexEntry& e) { return e.hash == 3; });
  {
    int fd = ::open((dir + "/blocks.dat").c_str(), O_RDWR);
    std::vector<uint8_t> zeros(slot_bytes, 0);
    ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), static_cast<off_t>(e3.slot * slot_bytes)), static_cast<ssize_t>(slot_bytes));
    ::close(fd);
  }
  auto s2 = KvStore::open(options(dir));
  EXPECT_FALSE(get_block(**s2, 3));
  EXPECT_EQ((*s2)->stats().checksum_failures, 1u);
}

TEST(KvStore, WriteErrorsDegradeToRamOnly) {
  for (const char* op : {"grow", "write", "index"}) {
    std::string dir = test::make_temp_dir("hz_store");
    auto s = KvStore::open(options(dir));
    ASSERT_TRUE(s.ok());
    put_block(**s, 1);
    (*s)->set_io_fault([op](const char* what) {
      return std::string(what) == op ? io_error("{}: No space left on device", what) : Status();
    });
    // "grow" only happens when the preallocated extent is full: use a fresh store for it.
    if (std::string(op) == "grow") {
      s->reset();
      ASSERT_EQ(0, test::run_command("rm -rf " + dir));
      s = KvStore::open(options(dir));
      (*s)->set_io_fault([](const char* what) { return std::string(what) == "grow" ? io_error("ENOSPC") : Status(); });
    }
    auto b = block(2);
    auto t = tokens(2);
    Status st = (*s)->put(2, 1, 1, t.data(), b.data());
    EXPECT_FALSE(st.ok()) << op;
    EXPECT_TRUE((*s)->degraded()) << op;
    EXPECT_EQ((*s)->stats().io_errors, 1u) << op;
    EXPECT_FALSE((*s)->contains(2));
    // Later writes are skipped quietly; reads of what is there still work.
    EXPECT_TRUE((*s)->put(3, 2, 1, t.data(), b.data()).ok());
    EXPECT_FALSE((*s)->contains(3));
    if (std::string(op) != "grow") EXPECT_TRUE(get_block(**s, 1)) << op;
  }
}

TEST(KvStore, FullBudgetEvictsColdest) {
  std::string dir = test::make_temp_dir("hz_store");
  auto s = KvStore::open(options(dir, 4));
  ASSERT_TRUE(s.ok());
  for (uint64_t h = 1; h <= 4; ++h) put_block(**s, h);
  EXPECT_TRUE(get_block(**s, 1));  // 1 is now the hottest; 2 the coldest
  put_block(**s, 5);
  EXPECT_EQ((*s)->stats().evictions, 1u);
  EXPECT_FALSE((*s)->contains(2));
  for (uint64_t h : {1, 3, 4, 5}) EXPECT_TRUE(get_block(**s, h)) << h;
  s->reset();
  auto re = KvStore::open(options(dir, 4));
  EXPECT_EQ((*re)->stats().blocks, 4u);
  for (uint64_t h : {1, 3, 4, 5}) EXPECT_TRUE(get_block(**re, h)) << h;
  EXPECT_FALSE(get_block(**re, 2));
}

// A writer process killed with SIGKILL at random moments (mid-record, mid-index-append, between
// an eviction's DEL and the slot's rewrite): every reopen succeeds, and every block the store
// still serves has exactly the bytes that were written for its hash — torn ones are dropped.
TEST(KvStore, SigkillAtRandomMomentsLeavesAStoreThatReopensCleanly) {
  std::string dir = test::make_temp_dir("hz_store");
  std::mt19937 rng(12345);
  uint64_t next = 1;
  uint64_t served_total = 0;
  for (int round = 0; round < 12; ++round) {
    const uint64_t first = next;
    next += 100000;
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: write blocks forever into a 16-slot store (evictions and slot reuse all the time).
      auto s = KvStore::open(options(dir, 16));
      if (!s.ok()) ::_exit(3);
      for (uint64_t h = first;; ++h) {
        auto b = block(h);
        auto t = tokens(h);
        (void)(*s)->put(h, h - 1, 1, t.data(), b.data());
        if (h % 7 == 0) (void)(*s)->sync();
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 40000));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited early: " << status;
    auto s = KvStore::open(options(dir, 16));
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.status().message();
    for (const IndexEntry& e : (*s)->entries()) {
      std::vector<uint8_t> out(kBlockBytes);
      auto t = tokens(e.hash);
      Status st = (*s)->get(e.hash, t.data(), out.data());
      if (st.ok()) {
        ASSERT_EQ(out, block(e.hash)) << "round " << round << " served wrong bytes for " << e.hash;
        ++served_total;
      } else {
        EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.message();
      }
    }
  }
  EXPECT_GT(served_total, 0u);  // the store did keep blocks across kills
}

TEST(KvStore, AMissingFolderIsMadeWithItsParentsAndAFileInTheWayNamesTheFlag) {
  const std::string root = test::make_temp_dir("hz_store");
  {
    auto s = KvStore::open(options(root + "/x/y"));
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_TRUE(std::filesystem::is_directory(root + "/x/y"));
  }
  std::ofstream(root + "/file") << "x";
  auto bad = KvStore::open(options(root + "/file/sub"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kIoError);
  EXPECT_NE(bad.status().message().find("--kv-disk-dir"), std::string::npos) << bad.status().message();
  std::filesystem::remove_all(root);
}

TEST(KvStore, SecondProcessIsRefusedAndBadOptionsNameTheFlag) {
  std::string dir = test::make_temp_dir("hz_store");
  auto a = KvStore::open(options(dir));
  ASSERT_TRUE(a.ok());
  auto b = KvStore::open(options(dir));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("in use"), std::string::npos);
  StoreOptions tiny = options(test::make_temp_dir("hz_store"));
  tiny.budget_bytes = 100;
  auto c = KvStore::open(tiny);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--kv-disk-budget"), std::string::npos);
  StoreOptions pol = options(test::make_temp_dir("hz_store"));
  pol.policy = "fifo";
  auto d = KvStore::open(pol);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--kv-disk-policy"), std::string::npos);
}

}  // namespace
}  // namespace hz::kvstore
