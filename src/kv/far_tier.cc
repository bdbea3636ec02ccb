#include "kv/far_tier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/check.h"
#include "base/log.h"
#include "kernels/kernels.h"

namespace hz {
namespace {

uint64_t segment_sum(const uint8_t* layer, const FarSegment& g) {
  const uint64_t h = kernels::checksum64(layer + g.offset, g.bytes, 0);
  return g.bytes2 == 0 ? h : kernels::checksum64(layer + g.offset2, g.bytes2, h);
}

uint64_t page_size() {
  static const uint64_t p = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return p;
}

uint64_t round_up(uint64_t n, uint64_t m) { return (n + m - 1) / m * m; }

// cachestat(2) (Linux 6.5): how many pages of a file range are in the page cache, in one call.
// Absent from older headers; x86-64 and arm64 share the generic number.
constexpr long kSysCachestat = 451;
struct CachestatRange {
  uint64_t off, len;
};
struct Cachestat {
  uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

Status write_all(int fd, const uint8_t* p, uint64_t n, uint64_t off) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("KV far tier write: {}", std::strerror(errno));
    }
    if (w == 0) return io_error("KV far tier write: no progress");
    p += w;
    n -= static_cast<uint64_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<FarTier>> FarTier::open(const FarTierOptions& o) {
  if (o.num_layers < 1 || o.layer_bytes == 0) return invalid_argument("KV far tier: empty block geometry");
  const uint64_t block_bytes = o.layer_bytes * static_cast<uint64_t>(o.num_layers);
  const uint64_t slots = std::clamp<uint64_t>(o.budget_bytes / block_bytes, 1, INT32_MAX / 2);
  std::unique_ptr<FarTier> t(new FarTier());
  t->capacity_ = static_cast<int32_t>(slots);
  t->num_layers_ = o.num_layers;
  t->layer_bytes_ = o.layer_bytes;
  t->stride_ = round_up(slots * o.layer_bytes, kChunk);
  t->map_bytes_ = t->stride_ * static_cast<uint64_t>(o.num_layers);
  // The folder and its parents are made if missing, as the disk store makes them.
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return io_error("KV far tier: cannot create the folder {}: {}", o.dir, ec.message());
  // Unlinked from the start: private to this process, gone with it whatever way it ends.
  t->fd_ = ::open(o.dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (t->fd_ < 0) {
    std::string path = o.dir + "/far-XXXXXX";
    t->fd_ = ::mkostemp(path.data(), O_CLOEXEC);
    if (t->fd_ < 0) return io_error("KV far tier: cannot create a file in {}: {}", o.dir, std::strerror(errno));
    ::unlink(path.c_str());
  }
  // Sparse: disk space is taken as blocks are written (a full disk shows up as a write error).
  if (::ftruncate(t->fd_, static_cast<off_t>(t->map_bytes_)) != 0) {
    return io_error("KV far tier: cannot size a {} byte file in {}: {}", t->map_bytes_, o.dir, std::strerror(errno));
  }
  // At an address aligned as the file's 2 MiB chunks, so that a chunk in one page-cache folio can
  // be mapped by one page-directory entry: reserve a chunk more, then map the file over it.
  void* r = ::mmap(nullptr, t->map_bytes_ + kChunk, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return io_error("KV far tier: cannot reserve {} bytes: {}", t->map_bytes_, std::strerror(errno));
  uint8_t* aligned = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(r), kChunk));
  const uint64_t head = static_cast<uint64_t>(aligned - static_cast<uint8_t*>(r));
  if (head > 0) ::munmap(r, head);
  ::munmap(aligned + t->map_bytes_, kChunk - head);
  void* m = ::mmap(aligned, t->map_bytes_, PROT_READ, MAP_SHARED | MAP_FIXED, t->fd_, 0);
  if (m == MAP_FAILED) {
    ::munmap(aligned, t->map_bytes_);
    return io_error("KV far tier: cannot map {} bytes: {}", t->map_bytes_, std::strerror(errno));
  }
  t->base_ = static_cast<uint8_t*>(m);
  ::madvise(m, t->map_bytes_, MADV_RANDOM);  // attention reads whole planes; no read-ahead past them
  // Chunks may be mapped whole where THP is "madvise", and a chunk that left the page cache is read
  // back whole, in one large folio (the fault path reads PMD-sized folios in such a mapping).
  ::madvise(m, t->map_bytes_, MADV_HUGEPAGE);
  t->segments_ = o.segments;
  if (t->segments_.empty()) t->segments_.push_back({0, o.layer_bytes, 0, 0});
  for (const FarSegment& g : t->segments_) {
    if (g.offset + g.bytes > o.layer_bytes || g.offset2 + g.bytes2 > o.layer_bytes)
      return invalid_argument("KV far tier: a checksum segment lies outside the layer");
  }
  return t;
}

FarTier::~FarTier() {
  if (base_ != nullptr) ::munmap(base_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

std::optional<int32_t> FarTier::put(const std::function<const uint8_t*(int32_t)>& layer_planes) {
  if (degraded_) return std::nullopt;
  int32_t slot;
  if (!free_.empty()) {
    std::pop_heap(free_.begin(), free_.end());
    slot = -free_.back();
    free_.pop_back();
  } else if (next_fresh_ < capacity_) {
    slot = next_fresh_++;
  } else {
    return std::nullopt;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t n = layer_bytes_;
  const size_t segs = segments_.size();
  if (sums_.size() < static_cast<size_t>(slot + 1) * num_layers_ * segs) {
    sums_.resize(static_cast<size_t>(slot + 1) * num_layers_ * segs);
    verified_.resize(sums_.size());
    corrupt_.resize(static_cast<size_t>(slot) + 1);
  }
  Status st = fault_ ? fault_("write") : Status();
  if (st.ok()) prefill_chunks(slot);
  for (int32_t l = 0; l < num_layers_ && st.ok(); ++l) {
    const uint8_t* src = layer_planes(l);
    const size_t base = (static_cast<size_t>(slot) * num_layers_ + l) * segs;
    for (size_t g = 0; g < segs; ++g) sums_[base + g] = segment_sum(src, segments_[g]);
    // Writing part of a page reads the rest of it from disk first: the neighbours sharing the
    // first or last page are checked again. This slot's bytes are what it just wrote.
    const uint64_t at = layer_offset(slot, l), p = page_size();
    unverify(at & ~(p - 1), at);
    unverify(at + n, std::min(map_bytes_, (at + n + p - 1) & ~(p - 1)));
    st = write_all(fd_, src, n, at);
    set_verified(slot, l, st.ok() ? 1 : 0);
  }
  write_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    ++io_errors_;
    degraded_ = true;
    HZ_LOG_WARN("KV far tier off ({}): running sequences keep their blocks in RAM", st.message());
    free_.push_back(-slot);
    std::push_heap(free_.begin(), free_.end());
    return std::nullopt;
  }
  corrupt_[slot] = 0;
  ++num_used_;
  high_water_ = std::max(high_water_, slot + 1);
  ++spills_;
  write_bytes_ += n * num_layers_;
  return slot;
}

void FarTier::release(int32_t slot) {
  HZ_CHECK(slot >= 0 && slot < next_fresh_ && num_used_ > 0);
  --num_used_;
  free_.push_back(-slot);
  std::push_heap(free_.begin(), free_.end());
}

bool FarTier::verify(int32_t slot, int32_t layer, int32_t seg) const {
  const size_t i = (static_cast<size_t>(slot) * num_layers_ + layer) * segments_.size() + seg;
  std::atomic_ref<uint8_t> verified(verified_[i]);
  if (verified.load(std::memory_order_relaxed) != 0) return true;
  const FarSegment& g = segments_[seg];
  checked_bytes_.fetch_add(g.bytes + g.bytes2, std::memory_order_relaxed);
  if (segment_sum(layer_data(slot, layer), g) == sums_[i]) {
    verified.store(1, std::memory_order_relaxed);
    return true;
  }
  checksum_failures_.fetch_add(1, std::memory_order_relaxed);
  std::atomic_ref<uint8_t>(corrupt_[slot]).store(1, std::memory_order_relaxed);
  return false;
}

void FarTier::set_verified(int32_t slot, int32_t layer, uint8_t v) {
  const size_t segs = segments_.size();
  const size_t base = (static_cast<size_t>(slot) * num_layers_ + layer) * segs;
  if (base + segs > verified_.size()) return;  // a slot never written
  std::fill(verified_.begin() + static_cast<std::ptrdiff_t>(base), verified_.begin() + static_cast<std::ptrdiff_t>(base + segs), v);
}

void FarTier::prefill_chunks(int32_t slot) {
  const uint64_t need = static_cast<uint64_t>(slot + 1) * layer_bytes_;
  if (!large_folios_ || need <= prefilled_) return;
  // One write of a whole chunk makes the page cache hold it in one large folio (where the file
  // system has them, as ext4 since Linux 6.16 and XFS do); later block writes land in it. Without
  // them nothing is lost but the speed: a failure here turns it off and the block writes that
  // follow meet their own errors. calloc'd zeros of this size are fresh pages the kernel fills on
  // read: the buffer costs no RSS and is gone after.
  const std::unique_ptr<uint8_t, decltype(&std::free)> zeros(static_cast<uint8_t*>(std::calloc(1, kChunk)), &std::free);
  if (zeros == nullptr) {
    large_folios_ = false;
    return;
  }
  while (prefilled_ < need) {
    const uint64_t n = std::min(kChunk, stride_ - prefilled_);
    for (int32_t l = 0; l < num_layers_; ++l) {
      if (!write_all(fd_, zeros.get(), n, static_cast<uint64_t>(l) * stride_ + prefilled_).ok()) {
        large_folios_ = false;
        return;
      }
    }
    prefilled_ += n;
  }
}

void FarTier::unverify(uint64_t begin, uint64_t end) {
  const uint64_t block = layer_bytes_;
  for (uint64_t l = begin / stride_; l < static_cast<uint64_t>(num_layers_) && l * stride_ < end; ++l) {
    const uint64_t from = std::max(begin, l * stride_) - l * stride_;
    const uint64_t to = std::min(end, (l + 1) * stride_) - l * stride_;
    for (uint64_t off = from - from % block; off < to; off += block) {
      if (off / block < static_cast<uint64_t>(capacity_)) set_verified(static_cast<int32_t>(off / block), static_cast<int32_t>(l), 0);
    }
  }
}

std::vector<int32_t> FarTier::take_corrupt() {
  std::vector<int32_t> out;
  // Only a failure since the last call costs a scan (this runs after every engine step).
  const uint64_t failures = checksum_failures_.load(std::memory_order_relaxed);
  if (failures == reported_failures_) return out;
  reported_failures_ = failures;
  for (int32_t s = 0; s < high_water_; ++s) {
    if (corrupt_[s] != 0) out.push_back(s);
    corrupt_[s] = 0;
  }
  return out;
}

std::pair<uint64_t, uint64_t> FarTier::layer_pages(int32_t layer, uint64_t align) const {
  const uint64_t b = layer_offset(0, layer);
  return {b, b + std::min(stride_, round_up(static_cast<uint64_t>(high_water_) * layer_bytes_, align))};
}

bool FarTier::all_cached(uint64_t begin, uint64_t end) {
  if (!cachestat_) return false;
  CachestatRange r{begin, end - begin};
  Cachestat c{};
  if (::syscall(kSysCachestat, fd_, &r, &c, 0) != 0) {
    cachestat_ = false;  // before Linux 6.5: mincore says it page by page
    return false;
  }
  return c.nr_cache == (end - begin) / page_size();
}

void FarTier::begin_layer(int32_t layer) {
  if (high_water_ == 0) return;
  const auto [b, e] = layer_pages(layer, page_size());
  if (e <= b) return;
  read_bytes_.fetch_add(static_cast<uint64_t>(num_used_) * layer_bytes_, std::memory_order_relaxed);
  // Pages outside the page cache are read from disk by this pass: every block with bytes in one
  // (of this layer, or a neighbouring layer's block sharing the page) is checked again. If
  // residency cannot be told, all are. One cachestat call answers the usual case (all cached).
  if (!all_cached(b, e)) {
    const uint64_t p = page_size();
    resident_.resize((e - b) / p);
    if (::mincore(base_ + b, e - b, resident_.data()) != 0) {
      unverify(b, e);
    } else {
      for (size_t pg = 0; pg < resident_.size(); ++pg) {
        if ((resident_[pg] & 1) == 0) unverify(b + pg * p, b + (pg + 1) * p);
      }
    }
  }
  // Whole chunks, so that each one in a large folio is mapped by one entry (and unmapped so in
  // drop(): a part would split the entry and leave the rest mapped). Kernels before 5.14 do not
  // know MADV_POPULATE_READ: page faults map the pages then.
  const auto [cb, ce] = layer_pages(layer, kChunk);
  if (populate_ && ::madvise(base_ + cb, ce - cb, kMadvPopulateRead) != 0 && errno == EINVAL) populate_ = false;
}

void FarTier::drop(int32_t layer) const {
  if (high_water_ == 0) return;
  const auto [b, e] = layer_pages(layer, kChunk);
  if (e > b) ::madvise(base_ + b, e - b, MADV_DONTNEED);
}

FarTierStats FarTier::stats() const {
  FarTierStats s;
  s.capacity = static_cast<uint64_t>(capacity_);
  s.blocks = static_cast<uint64_t>(num_used_);
  s.high_water = static_cast<uint64_t>(high_water_);
  s.spills = spills_;
  s.write_bytes = write_bytes_;
  s.read_bytes = read_bytes_.load(std::memory_order_relaxed);
  s.checked_bytes = checked_bytes_.load(std::memory_order_relaxed);
  s.checksum_failures = checksum_failures_.load(std::memory_order_relaxed);
  s.io_errors = io_errors_;
  s.write_seconds = write_seconds_;
  s.degraded = degraded_;
  return s;
}

void FarTier::evict_page_cache() const {
  ::fdatasync(fd_);
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
}

Status FarTier::corrupt_for_test(int32_t slot, int32_t layer, uint64_t offset) {
  HZ_CHECK(offset < layer_bytes_);
  uint8_t b = static_cast<uint8_t>(layer_data(slot, layer)[offset] ^ 0x5a);
  set_verified(slot, layer, 0);
  return write_all(fd_, &b, 1, layer_offset(slot, layer) + offset);
}

}  // namespace hz
