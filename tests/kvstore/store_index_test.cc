// The disk tier's index log: replay, torn tails, and a crash harness that stops the writer at every
// byte of the log tail and between every step of a compaction, then checks what reopens.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "kvstore/store_index.h"
#include "support/test_support.h"

namespace hz::kvstore {
namespace {

IndexHeader header() {
  IndexHeader h;
  h.fingerprint = {0x1111, 0x2222};
  h.hash_seed = 42;
  h.slot_bytes = 4096;
  return h;
}

IndexEntry entry(uint64_t hash, uint32_t slot) {
  IndexEntry e;
  e.hash = hash;
  e.parent = hash - 1;
  e.slot = slot;
  e.kv_type = 1;
  e.codec = 1;
  e.token_count = 16;
  e.payload_len = 1000 + slot;
  e.record_checksum = hash * 31;
  return e;
}

std::vector<uint8_t> read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<uint64_t> hashes(const std::vector<IndexEntry>& v) {
  std::vector<uint64_t> h;
  for (const auto& e : v) h.push_back(e.hash);
  return h;
}

TEST(StoreIndex, PutEraseReplay) {
  std::string dir = test::make_temp_dir("hz_index");
  std::string p = dir + "/index.log";
  {
    auto ix = StoreIndex::create(p, header());
    ASSERT_TRUE(ix.ok()) << ix.status().message();
    ASSERT_TRUE(ix->put(entry(10, 0)).ok());
    ASSERT_TRUE(ix->put(entry(11, 1)).ok());
    ASSERT_TRUE(ix->put(entry(12, 2)).ok());
    ASSERT_TRUE(ix->erase(11).ok());
    ASSERT_TRUE(ix->put(entry(10, 5)).ok());  // re-put moves it to the end
    ASSERT_TRUE(ix->sync().ok());
  }
  auto ix = StoreIndex::open(p);
  ASSERT_TRUE(ix.ok()) << ix.status().message();
  EXPECT_FALSE(ix->repaired());
  EXPECT_EQ(ix->header().hash_seed, 42u);
  EXPECT_EQ(ix->header().fingerprint, header().fingerprint);
  ASSERT_EQ(hashes(ix->replayed()), (std::vector<uint64_t>{12, 10}));
  EXPECT_EQ(ix->replayed()[1].slot, 5u);
  EXPECT_EQ(ix->replayed()[0].payload_len, 1002u);
  EXPECT_EQ(ix->num_records(), 5u);
}

TEST(StoreIndex, MissingAndCorruptHeader) {
  std::string dir = test::make_temp_dir("hz_index");
  auto missing = StoreIndex::open(dir + "/nope.log");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  write_all(dir + "/short.log", {1, 2, 3});
  EXPECT_EQ(StoreIndex::open(dir + "/short.log").status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE(StoreIndex::create(dir + "/h.log", header()).ok());
  auto b = read_all(dir + "/h.log");
  b[20] ^= 1;  // inside the fingerprint: the header checksum catches it
  write_all(dir + "/h.log", b);
  auto bad = StoreIndex::open(dir + "/h.log");
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("checksum"), std::string::npos) << bad.status().message();
}

// Kill the writer at every byte of an append: the log is cut at each length between "before the
// last record" and "after it"; reopening must yield exactly the complete records, and later
// appends must follow them (the torn tail is cut, not left in the middle).
TEST(StoreIndex, TruncationAtEveryOffsetKeepsOnlyCompleteRecords) {
  std::string dir = test::make_temp_dir("hz_index");
  std::string p = dir + "/index.log";
  std::vector<uint64_t> ends;  // log length after each record
  {
    auto ix = StoreIndex::create(p, header());
    ASSERT_TRUE(ix.ok());
    ends.push_back(ix->log_bytes());
    for (uint64_t h = 1; h <= 4; ++h) {
      ASSERT_TRUE(ix->put(entry(100 + h, static_cast<uint32_t>(h))).ok());
      ends.push_back(ix->log_bytes());
    }
    ASSERT_TRUE(ix->erase(102).ok());
    ends.push_back(ix->log_bytes());
  }
  const std::vector<uint8_t> full = read_all(p);
  ASSERT_EQ(full.size(), ends.back());
  for (size_t cut = ends[0]; cut <= full.size(); ++cut) {
    write_all(p, std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(cut)));
    size_t complete = 0;
    while (complete + 1 < ends.size() && ends[complete + 1] <= cut) ++complete;
    std::vector<uint64_t> want;
    for (size_t k = 1; k <= std::min<size_t>(complete, 4); ++k) want.push_back(100 + k);
    if (complete == 5) want.erase(std::find(want.begin(), want.end(), 102u));
    auto ix = StoreIndex::open(p);
    ASSERT_TRUE(ix.ok()) << "cut " << cut << ": " << ix.status().message();
    EXPECT_EQ(hashes(ix->replayed()), want) << "cut at " << cut;
    EXPECT_EQ(ix->repaired(), cut != ends[complete]) << "cut at " << cut;
    // Appending after a repaired tail yields a log that replays completely.
    ASSERT_TRUE(ix->put(entry(999, 9)).ok());
    auto again = StoreIndex::open(p);
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->repaired()) << "cut at " << cut;
    want.push_back(999);
    EXPECT_EQ(hashes(again->replayed()), want) << "cut at " << cut;
  }
}

TEST(StoreIndex, FlippedByteDropsThatRecordAndAllAfter) {
  std::string dir = test::make_temp_dir("hz_index");
  std::string p = dir + "/index.log";
  uint64_t second_end = 0;
  {
    auto ix = StoreIndex::create(p, header());
    ASSERT_TRUE(ix->put(entry(1, 1)).ok());
    ASSERT_TRUE(ix->put(entry(2, 2)).ok());
    second_end = ix->log_bytes();
    ASSERT_TRUE(ix->put(entry(3, 3)).ok());
  }
  const std::vector<uint8_t> full = read_all(p);
  for (size_t off = second_end; off < full.size(); ++off) {
    auto b = full;
    b[off] ^= 0x40;
    write_all(p, b);
    auto ix = StoreIndex::open(p);
    ASSERT_TRUE(ix.ok());
    EXPECT_EQ(hashes(ix->replayed()), (std::vector<uint64_t>{1, 2})) << "flip at " << off;
    EXPECT_TRUE(ix->repaired());
  }
}

// Compaction stopped between each of its steps: the log on disk is the old one or the new one,
// never a mix, and always opens.
TEST(StoreIndex, CompactionCrashAtEveryStep) {
  const char* steps[] = {"compact.open_tmp", "compact.write_tmp", "compact.fsync_tmp", "compact.rename", "compact.fsync_dir", ""};
  for (const char* stop : steps) {
    std::string dir = test::make_temp_dir("hz_index");
    std::string p = dir + "/index.log";
    auto ix = StoreIndex::create(p, header());
    ASSERT_TRUE(ix.ok());
    for (uint64_t h = 1; h <= 6; ++h) ASSERT_TRUE(ix->put(entry(h, static_cast<uint32_t>(h))).ok());
    for (uint64_t h = 1; h <= 3; ++h) ASSERT_TRUE(ix->erase(h).ok());
    std::string crashed;
    ix->set_failpoint([&](const char* step) {
      if (std::string(step) == stop) {
        crashed = step;
        return io_error("crash at {}", step);
      }
      return Status();
    });
    Status s = ix->compact({entry(4, 4), entry(5, 5), entry(6, 6)});
    EXPECT_EQ(s.ok(), std::string(stop).empty()) << stop;
    auto re = StoreIndex::open(p);
    ASSERT_TRUE(re.ok()) << stop << ": " << re.status().message();
    EXPECT_EQ(hashes(re->replayed()), (std::vector<uint64_t>{4, 5, 6})) << stop;
    const bool renamed = std::string(stop).empty() || std::string(stop) == "compact.fsync_dir";
    EXPECT_EQ(re->num_records(), renamed ? 3u : 9u) << stop;
  }
}

TEST(StoreIndex, ReplayRejectsGarbageWithoutCrashing) {
  std::vector<uint8_t> b(kIndexHeaderBytes);
  encode_index_header(header(), b.data());
  // A frame claiming a huge body, then random bytes.
  std::vector<uint8_t> junk = {0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  b.insert(b.end(), junk.begin(), junk.end());
  auto r = replay_index(b.data(), b.size());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->entries.empty());
  EXPECT_TRUE(r->torn_tail);
  EXPECT_EQ(r->valid_bytes, kIndexHeaderBytes);
}

}  // namespace
}  // namespace hz::kvstore
