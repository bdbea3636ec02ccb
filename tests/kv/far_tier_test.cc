// FarTier on its own: blocks written layer by layer read back byte for byte through the mapping,
// a layer pass maps whole 2 MiB chunks and drop() unmaps them, slots are reused lowest first, a
// missing folder is made (with its parents), a
// flipped byte on disk fails verify() and is reported once, a write error degrades the tier (no
// more spills, nothing lost), drop() loses no data, and bytes are hashed again only when they may
// have come from disk.
#include "kv/far_tier.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support/test_support.h"

namespace hz {
namespace {

constexpr int32_t kLayers = 3;
constexpr uint64_t kPlane = 4099;  // odd: layer regions do not start on page boundaries

struct Block {
  std::vector<uint8_t> bytes;  // [layer][K, V] planes, as the arena holds them
  explicit Block(uint32_t seed) : bytes(2 * kPlane * kLayers) {
    std::mt19937 rng(seed);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  }
  const uint8_t* layer(int32_t l) const { return bytes.data() + 2 * kPlane * l; }
};

std::unique_ptr<FarTier> open_tier(const std::string& dir, int32_t slots) {
  FarTierOptions o;
  o.dir = dir;
  o.budget_bytes = 2 * kPlane * kLayers * slots;
  o.num_layers = kLayers;
  o.layer_bytes = 2 * kPlane;
  auto t = FarTier::open(o);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::optional<int32_t> put(FarTier& t, const Block& b) {
  return t.put([&](int32_t l) { return b.layer(l); });
}

bool same(const FarTier& t, int32_t slot, const Block& b) {
  for (int32_t l = 0; l < kLayers; ++l) {
    if (std::memcmp(t.layer_data(slot, l), b.layer(l), 2 * kPlane) != 0) return false;
  }
  return true;
}

TEST(FarTierTest, BlocksReadBackExactlyAndSlotsAreReusedLowestFirst) {
  const std::string dir = test::make_temp_dir("far_tier");
  auto t = open_tier(dir, 4);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->capacity(), 4);
  // The file is unlinked: nothing of it is visible in the folder.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::vector<Block> blocks;
  for (uint32_t i = 0; i < 4; ++i) blocks.emplace_back(100 + i);
  for (int32_t i = 0; i < 4; ++i) {
    auto s = put(*t, blocks[i]);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(*s, i);
  }
  EXPECT_FALSE(put(*t, Block(7)).has_value()) << "a full tier takes nothing";
  EXPECT_EQ(t->num_free(), 0);
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(same(*t, i, blocks[i])) << "slot " << i;
    for (int32_t l = 0; l < kLayers; ++l) EXPECT_TRUE(t->verify(i, l));
  }
  t->release(2);
  t->release(1);
  Block again(55);
  auto s = put(*t, again);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, 1) << "the lowest free slot, so a sequence's blocks stay close";
  EXPECT_TRUE(same(*t, 1, again));
  EXPECT_TRUE(same(*t, 3, blocks[3]));
  const FarTierStats st = t->stats();
  EXPECT_EQ(st.spills, 5u);
  EXPECT_EQ(st.blocks, 3u);
  EXPECT_EQ(st.write_bytes, 5 * 2 * kPlane * kLayers);
  EXPECT_EQ(st.checksum_failures, 0u);
  std::filesystem::remove_all(dir);
}

TEST(FarTierTest, AMissingFolderIsMadeWithItsParentsAndAFileInTheWayIsAnError) {
  const std::string root = test::make_temp_dir("far_tier");
  const std::string dir = root + "/a/b";
  auto t = open_tier(dir, 2);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  ASSERT_TRUE(put(*t, Block(3)).has_value());
  EXPECT_TRUE(same(*t, 0, Block(3)));
  // A regular file where the folder should be: a clear error naming the path, no crash.
  std::ofstream(root + "/file") << "x";
  FarTierOptions o;
  o.dir = root + "/file/sub";
  o.budget_bytes = 2 * kPlane * kLayers;
  o.num_layers = kLayers;
  o.layer_bytes = 2 * kPlane;
  auto bad = FarTier::open(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kIoError);
  EXPECT_NE(bad.status().message().find(o.dir), std::string::npos) << bad.status().message();
  t.reset();
  std::filesystem::remove_all(root);
}

TEST(FarTierTest, CorruptByteOnDiskFailsVerifyAndIsReportedOnce) {
  const std::string dir = test::make_temp_dir("far_tier");
  auto t = open_tier(dir, 4);
  ASSERT_NE(t, nullptr);
  Block a(1), b(2);
  ASSERT_EQ(put(*t, a), 0);
  ASSERT_EQ(put(*t, b), 1);
  EXPECT_TRUE(t->take_corrupt().empty());
  ASSERT_TRUE(t->corrupt_for_test(1, 2, 2 * kPlane - 1).ok());  // the last byte of V, last layer
  EXPECT_TRUE(t->verify(0, 2));
  EXPECT_TRUE(t->verify(1, 0)) << "other layers of the slot are intact";
  EXPECT_FALSE(t->verify(1, 2));
  EXPECT_EQ(t->take_corrupt(), std::vector<int32_t>{1});
  EXPECT_TRUE(t->take_corrupt().empty()) << "reported once";
  EXPECT_EQ(t->stats().checksum_failures, 1u);
  // The slot is recomputed elsewhere and freed; written again it verifies.
  t->release(1);
  ASSERT_EQ(put(*t, b), 1);
  EXPECT_TRUE(t->verify(1, 2));
  std::filesystem::remove_all(dir);
}

TEST(FarTierTest, WriteErrorDegradesTheTier) {
  const std::string dir = test::make_temp_dir("far_tier");
  auto t = open_tier(dir, 4);
  ASSERT_NE(t, nullptr);
  Block a(1);
  ASSERT_EQ(put(*t, a), 0);
  t->set_io_fault([](const char* op) { return std::string(op) == "write" ? io_error("ENOSPC (injected)") : Status(); });
  EXPECT_FALSE(put(*t, Block(2)).has_value());
  EXPECT_TRUE(t->degraded());
  EXPECT_EQ(t->num_free(), 0) << "no more spills after an I/O error";
  EXPECT_EQ(t->stats().io_errors, 1u);
  EXPECT_EQ(t->num_used(), 1);
  EXPECT_TRUE(same(*t, 0, a)) << "what was written stays readable";
  std::filesystem::remove_all(dir);
}

TEST(FarTierTest, DropUnmapsWithoutLosingData) {
  const std::string dir = test::make_temp_dir("far_tier");
  auto t = open_tier(dir, 8);
  ASSERT_NE(t, nullptr);
  std::vector<Block> blocks;
  for (uint32_t i = 0; i < 8; ++i) blocks.emplace_back(i);
  for (const Block& b : blocks) ASSERT_TRUE(put(*t, b).has_value());
  uint64_t after_first = 0;
  for (int round = 0; round < 3; ++round) {
    for (int32_t l = 0; l < kLayers; ++l) {
      t->begin_layer(l);
      for (int32_t s = 0; s < 8; ++s) ASSERT_TRUE(t->verify(s, l));
      t->drop(l);
    }
    if (round == 0) after_first = t->stats().checked_bytes;
  }
  for (int32_t s = 0; s < 8; ++s) EXPECT_TRUE(same(*t, s, blocks[s]));
  EXPECT_EQ(t->stats().checked_bytes, after_first) << "pages that stayed in the page cache are not hashed again";
  std::filesystem::remove_all(dir);
}

// Page-sized planes (no page shared between blocks): written bytes are trusted, checked bytes
// stay trusted while in the page cache, and a block is checked again once its pages left it.
TEST(FarTierTest, BytesAreHashedAgainOnlyWhenTheyMayComeFromDisk) {
  const std::string dir = test::make_temp_dir("far_tier");
  FarTierOptions o;
  o.dir = dir;
  o.num_layers = 2;
  o.layer_bytes = 2 * 4096;
  o.budget_bytes = 2 * 4096 * 2 * 4;
  auto t = FarTier::open(o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<uint8_t> bytes(2 * 4096 * 2, 7);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*t)->put([&](int32_t l) { return bytes.data() + 2 * 4096 * l; }).has_value());
  for (int32_t l = 0; l < 2; ++l) {
    (*t)->begin_layer(l);
    for (int32_t s = 0; s < 3; ++s) EXPECT_TRUE((*t)->verify(s, l));
  }
  EXPECT_EQ((*t)->stats().checked_bytes, 0u) << "what was just written is in the page cache as written";
  ASSERT_TRUE((*t)->corrupt_for_test(1, 0, 10).ok());
  EXPECT_FALSE((*t)->verify(1, 0));
  EXPECT_EQ((*t)->stats().checked_bytes, 2 * 4096u);
  EXPECT_TRUE((*t)->verify(2, 0));
  EXPECT_EQ((*t)->stats().checked_bytes, 2 * 4096u) << "the neighbours were not touched";
  // Out of the page cache (unmapped first): the next pass checks every block of the layer again.
  (*t)->drop(0);
  (*t)->drop(1);
  (*t)->evict_page_cache();
  std::vector<unsigned char> resident(2);
  ASSERT_EQ(::mincore(const_cast<uint8_t*>((*t)->layer_data(0, 1)), 2 * 4096, resident.data()), 0);
  if ((resident[0] & 1) != 0) GTEST_SKIP() << "the kernel kept the file's pages in the page cache";
  (*t)->begin_layer(1);
  for (int32_t s = 0; s < 3; ++s) EXPECT_TRUE((*t)->verify(s, 1));
  EXPECT_EQ((*t)->stats().checked_bytes, 2 * 4096u + 3 * 2 * 4096u);
  std::filesystem::remove_all(dir);
}

// Planes that are not page multiples: writing a block reads its first and last pages, so the
// neighbours sharing them are checked again; the block written is not.
TEST(FarTierTest, AWriteSharingAPageMarksTheNeighbourForChecking) {
  const std::string dir = test::make_temp_dir("far_tier");
  auto t = open_tier(dir, 4);
  ASSERT_NE(t, nullptr);
  Block a(1), b(2);
  ASSERT_EQ(put(*t, a), 0);
  ASSERT_EQ(put(*t, b), 1);
  EXPECT_TRUE(t->verify(1, 1));
  EXPECT_EQ(t->stats().checked_bytes, 0u);
  EXPECT_TRUE(t->verify(0, 1));
  EXPECT_EQ(t->stats().checked_bytes, 2 * kPlane) << "slot 0 shares a page with slot 1";
  EXPECT_TRUE(t->verify(0, 1));
  EXPECT_EQ(t->stats().checked_bytes, 2 * kPlane) << "checked once";
  std::filesystem::remove_all(dir);
}

// Segments: a flipped byte fails only the segment that covers it; bytes outside every segment
// are not checked; a segment that passed is not checked again while it stays in the page cache.
TEST(FarTierTest, SegmentsAreCheckedSeparately) {
  const std::string dir = test::make_temp_dir("far_tier");
  FarTierOptions o;
  o.dir = dir;
  o.budget_bytes = 2 * kPlane * kLayers * 2;
  o.num_layers = kLayers;
  o.layer_bytes = 2 * kPlane;
  o.segments = {{0, 100, 4000, 10}, {kPlane, 100, 0, 0}};
  auto t = FarTier::open(o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  Block a(9);
  ASSERT_EQ(put(**t, a), 0);
  ASSERT_TRUE((*t)->corrupt_for_test(0, 1, 4005).ok());  // second range of segment 0
  ASSERT_TRUE((*t)->corrupt_for_test(0, 2, 2000).ok());  // in no segment
  EXPECT_TRUE((*t)->verify(0, 1, 1));
  EXPECT_FALSE((*t)->verify(0, 1, 0));
  EXPECT_TRUE((*t)->verify(0, 2, 0));
  EXPECT_TRUE((*t)->verify(0, 2, 1));
  const uint64_t read = (*t)->stats().checked_bytes;
  EXPECT_TRUE((*t)->verify(0, 2, 1));
  EXPECT_EQ((*t)->stats().checked_bytes, read) << "checked already";
  (*t)->begin_layer(2);
  EXPECT_TRUE((*t)->verify(0, 2, 1));
  EXPECT_EQ((*t)->stats().checked_bytes, read) << "still in the page cache: not hashed again";
  EXPECT_FALSE((*t)->verify(0, 1, 0)) << "a failed segment is checked (and fails) again";
  EXPECT_GT((*t)->stats().checked_bytes, read);
  EXPECT_EQ((*t)->take_corrupt(), std::vector<int32_t>{0});
  o.segments = {{2 * kPlane - 10, 11, 0, 0}};
  EXPECT_FALSE(FarTier::open(o).ok()) << "a segment past the layer is refused";
  std::filesystem::remove_all(dir);
}

// Kilobytes of "Rss" and "FilePmdMapped" over the mappings that meet [begin, end), from smaps.
std::pair<uint64_t, uint64_t> mapped_kib(const void* begin, const void* end) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool in = false;
  uint64_t rss = 0, pmd = 0;
  while (std::getline(f, line)) {
    uintptr_t a = 0, b = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(':') > line.find(' ') && (head >> std::hex >> a >> dash >> b) && dash == '-') {
      in = a < reinterpret_cast<uintptr_t>(end) && b > reinterpret_cast<uintptr_t>(begin);
      continue;
    }
    uint64_t kib = 0;
    if (in && std::sscanf(line.c_str(), "Rss: %lu kB", &kib) == 1) rss += kib;
    if (in && std::sscanf(line.c_str(), "FilePmdMapped: %lu kB", &kib) == 1) pmd += kib;
  }
  return {rss, pmd};
}

// Whether this kernel and file system map a 2 MiB chunk of a file, written whole, with one
// page-directory entry (large folios: ext4 since Linux 6.16, XFS).
bool file_chunks_map_whole(const std::string& dir) {
  const uint64_t chunk = uint64_t{2} << 20;
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR, 0600);
  if (fd < 0) return false;
  std::vector<uint8_t> zeros(chunk, 0);
  bool ok = ::pwrite(fd, zeros.data(), chunk, 0) == static_cast<ssize_t>(chunk);
  void* r = ok ? ::mmap(nullptr, 2 * chunk, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
  if (r != MAP_FAILED) {
    uint8_t* at = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(r) + chunk - 1) & ~(chunk - 1));
    void* m = ::mmap(at, chunk, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    ::madvise(m, chunk, MADV_HUGEPAGE);
    ok = m != MAP_FAILED && ::madvise(m, chunk, 22 /* MADV_POPULATE_READ */) == 0 && mapped_kib(at, at + chunk).second >= 2048;
    ::munmap(r, 2 * chunk);
  }
  ::close(fd);
  return ok;
}

// A layer pass maps whole 2 MiB chunks (one page-directory entry each where the file system has
// large folios: no page-table entry per 4 KiB page), drop() leaves nothing of them mapped, and
// the bytes read back exactly.
TEST(FarTierTest, ALayerPassMapsWholeChunksAndDropUnmapsThemAll) {
  const std::string dir = test::make_temp_dir("far_tier");
  FarTierOptions o;
  o.dir = dir;
  o.num_layers = 2;
  o.layer_bytes = 64 << 10;
  o.budget_bytes = o.layer_bytes * 2 * 64;  // 4 MiB of each layer: two chunks
  auto t = FarTier::open(o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<uint8_t> bytes(o.layer_bytes * 2);
  for (int32_t i = 0; i < 40; ++i) {  // 2.5 MiB of each layer: both chunks in use
    std::fill(bytes.begin(), bytes.end(), static_cast<uint8_t>(i));
    ASSERT_TRUE((*t)->put([&](int32_t l) { return bytes.data() + o.layer_bytes * l; }).has_value());
  }
  const uint8_t* begin = (*t)->layer_data(0, 0);
  const uint8_t* end = (*t)->layer_data(0, 1) + (4 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(begin) % (2 << 20), 0u) << "chunk-aligned mapping";
  EXPECT_EQ((*t)->layer_data(0, 1) - begin, 4 << 20) << "each layer spans whole chunks";
  (*t)->begin_layer(1);
  for (int32_t s = 0; s < 40; ++s) {
    ASSERT_TRUE((*t)->verify(s, 1));
    EXPECT_EQ((*t)->layer_data(s, 1)[o.layer_bytes - 1], static_cast<uint8_t>(s));
  }
  const auto [rss, pmd] = mapped_kib(begin, end);
  EXPECT_GT(rss, 0u);
  EXPECT_LE(rss, 4096u) << "nothing of layer 0 is mapped";
  const bool whole = file_chunks_map_whole(dir);
  if (whole) {
    EXPECT_EQ(rss, 4096u) << "layer 1 of the 40 blocks is mapped, in whole chunks";
    EXPECT_EQ(pmd, 4096u) << "both chunks of layer 1 mapped by page-directory entries";
  }
  (*t)->drop(1);
  EXPECT_EQ(mapped_kib(begin, end).first, 0u) << "drop() leaves no page of the chunks mapped";
  std::filesystem::remove_all(dir);
  if (!whole) GTEST_SKIP() << "this file system keeps no 2 MiB folios: chunks map in 4 KiB pages (checked the rest)";
}

}  // namespace
}  // namespace hz
