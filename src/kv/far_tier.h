// FarTier: disk room for the far (old, finalized) blocks of running sequences, so one sequence's
// context is not bounded by the RAM pool. A spilled block's bytes are exactly its arena bytes, so
// attention reads them as it would read RAM and the logits do not change.
//
// One unlinked temporary file in the KV disk folder (private to this process; nothing to clean up
// after a crash), laid out layer-major: layer l of slot s — its K and V planes, contiguous as in
// the arena — sits at l * stride + s * layer_bytes, each layer's span (stride) a whole number of
// 2 MiB chunks. The file is mapped read-only and written with pwrite. Attention reads layer l of
// every far block through the mapping (the read tables of kv/kv_read_table.h point into it), so
// the pages of one layer of the far blocks are resident while that layer's attention runs; drop()
// unmaps them afterwards (they stay in the kernel's page cache, outside the process's RSS). The
// layer-major layout keeps the kernel's fault-around from mapping the other layers' planes.
//
// Mapping and unmapping a layer every pass costs a page-table entry per 4 KiB page (about 0.75 us
// each here: a 64K-token context of synth-tiny paid 12 ms a step). So each chunk is first written
// whole (zeros, before the first block reaches it): the page cache then holds it in one 2 MiB
// folio where the file system allows (ext4 since Linux 6.16, XFS), the chunk-aligned mapping maps
// it with one page-directory entry, and the pass costs a few entries per layer. A chunk that left
// the page cache is read back whole into a large folio again (the mapping is MADV_HUGEPAGE).
// Where the file system or kernel has no large folios, everything works in 4 KiB pages, slower.
//
// Every segment of a layer (by default the whole layer; the KV cache uses one per K/V stream and
// KV head: that head's rows and scales) has an XXH3 checksum kept in RAM. What comes from disk is
// checked: when a layer's attention pass begins (begin_layer()), the far blocks whose pages are not
// all in the page cache (mincore) will be read from disk and lose their "verified" mark, and the
// layer's read tables check every unmarked segment they refer to, spread over the thread pool.
// Bytes that stayed in the page cache since they were written or checked are not hashed again (the
// file is private to this process: only a read from disk can change them). A mismatch is counted
// and reported (take_corrupt()) and the engine recomputes the sequence instead of serving it. A
// write error (ENOSPC, EIO) logs one warning, counts an I/O error and stops further spills
// ("degraded"): the engine continues with what fits in RAM.
//
// put() / release() / drop() belong to the engine thread; verify() may run on worker threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace hz {

// Bytes of one layer of a block (K plane, then V plane) covered by one checksum: one or two ranges.
struct FarSegment {
  uint64_t offset = 0, bytes = 0;
  uint64_t offset2 = 0, bytes2 = 0;
};

struct FarTierOptions {
  std::string dir;            // where the (unlinked) file lives
  uint64_t budget_bytes = 0;  // capacity = budget / block bytes, at least 1 slot
  int32_t num_layers = 0;
  uint64_t layer_bytes = 0;   // one layer of one block: its K plane, then its V plane
  std::vector<FarSegment> segments;  // per layer; empty: one segment, the whole layer
};

struct FarTierStats {
  uint64_t capacity = 0;           // slots
  uint64_t blocks = 0;             // slots in use
  uint64_t high_water = 0;         // slots [0, high_water) ever written
  uint64_t spills = 0;             // blocks written
  uint64_t write_bytes = 0;
  uint64_t read_bytes = 0;         // plane bytes mapped for attention (every layer pass)
  uint64_t checked_bytes = 0;      // bytes hashed against their checksums (what came from disk)
  uint64_t checksum_failures = 0;
  uint64_t io_errors = 0;
  double write_seconds = 0;
  bool degraded = false;
};

class FarTier {
 public:
  static Result<std::unique_ptr<FarTier>> open(const FarTierOptions& o);
  ~FarTier();
  FarTier(const FarTier&) = delete;
  FarTier& operator=(const FarTier&) = delete;

  int32_t capacity() const { return capacity_; }
  int32_t num_used() const { return num_used_; }
  int32_t num_free() const { return degraded_ ? 0 : capacity_ - num_used_; }
  bool degraded() const { return degraded_; }

  // Writes a block — `layer_planes(l)` gives the layer_bytes of layer l (K then V) — into a
  // free slot and returns it; nullopt when full or degraded (an I/O error degrades the tier).
  std::optional<int32_t> put(const std::function<const uint8_t*(int32_t layer)>& layer_planes);
  void release(int32_t slot);

  // Layer `layer` of `slot`: K plane, then V plane (through the mapping).
  const uint8_t* layer_data(int32_t slot, int32_t layer) const {
    return base_ + layer_offset(slot, layer);
  }
  int32_t num_segments() const { return static_cast<int32_t>(segments_.size()); }
  // Starts the attention pass of `layer`: the blocks whose pages left the page cache are marked for
  // checking, then the layer's pages are mapped in one call (MADV_POPULATE_READ, Linux 5.14)
  // instead of a page fault per few pages.
  void begin_layer(int32_t layer);
  // Checks segment `seg` of layer `layer` of `slot` against its checksum unless it is marked
  // verified (written or checked since its pages were last read from disk); on mismatch counts
  // it, marks the slot corrupt and returns false. Thread-safe.
  bool verify(int32_t slot, int32_t layer, int32_t seg = 0) const;
  // Slots found corrupt since the last call (each once).
  std::vector<int32_t> take_corrupt();
  // Unmaps what attention has read of `layer` (every slot in use): the RSS bound.
  void drop(int32_t layer) const;

  FarTierStats stats() const;

  // Tests: called before each write-side operation ("write"); an error fails it. And flips one
  // byte of layer `layer` of `slot` in the file and takes its verified mark, as a read of a corrupt
  // disk would.
  void set_io_fault(std::function<Status(const char*)> f) { fault_ = std::move(f); }
  Status corrupt_for_test(int32_t slot, int32_t layer, uint64_t offset);
  // Writes the file back and asks the kernel to drop it from the page cache (best effort): the
  // next passes read from disk, as after memory pressure (tests, and `bench engine --far-cold`).
  void evict_page_cache() const;

 private:
  FarTier() = default;
  uint64_t layer_offset(int32_t slot, int32_t layer) const {
    return static_cast<uint64_t>(layer) * stride_ + static_cast<uint64_t>(slot) * layer_bytes_;
  }
  // [begin, end) file offsets of `layer` of the slots ever used, the end rounded up to `align`.
  std::pair<uint64_t, uint64_t> layer_pages(int32_t layer, uint64_t align) const;
  // Writes zeros over the chunks slot `slot` is the first to reach, in every layer (see .cc).
  void prefill_chunks(int32_t slot);
  // Whether every page of file offsets [begin, end) is in the page cache (false: cannot tell).
  bool all_cached(uint64_t begin, uint64_t end);
  // Clears the verified mark of every (slot, layer) with a byte in file offsets [begin, end).
  void unverify(uint64_t begin, uint64_t end);
  void set_verified(int32_t slot, int32_t layer, uint8_t v);
  static constexpr int kMadvPopulateRead = 22;  // MADV_POPULATE_READ (Linux 5.14), absent from older headers
  static constexpr uint64_t kChunk = uint64_t{2} << 20;  // a page-directory entry's span on x86-64 and arm64 (4 KiB pages)

  int fd_ = -1;
  uint8_t* base_ = nullptr;
  uint64_t map_bytes_ = 0;
  int32_t capacity_ = 0;
  int32_t num_layers_ = 0;
  uint64_t layer_bytes_ = 0;
  uint64_t stride_ = 0;               // file bytes per layer: capacity * layer_bytes rounded up to a chunk
  uint64_t prefilled_ = 0;            // bytes of each layer's span written whole, chunk by chunk
  bool large_folios_ = true;          // prefilling works (cleared on a write error)
  bool cachestat_ = true;             // cachestat(2) works here (cleared on an error)
  std::vector<int32_t> free_;         // min-heap of negated slots: lowest first, so runs stay contiguous
  int32_t next_fresh_ = 0;            // slots [next_fresh_, capacity_) never used
  int32_t num_used_ = 0;
  int32_t high_water_ = 0;            // slots [0, high_water_) ever used
  std::vector<FarSegment> segments_;
  std::vector<uint64_t> sums_;        // [slot][layer][segment]
  // Per [slot][layer][segment]: 1 when verified since its bytes were last read from disk
  // (std::atomic_ref: worker threads set it during a pass; the engine thread clears it between).
  mutable std::vector<uint8_t> verified_;
  std::vector<unsigned char> resident_;    // mincore scratch of begin_layer()
  mutable std::vector<uint8_t> corrupt_;  // per slot (std::atomic_ref, as verified_)
  bool degraded_ = false;
  bool populate_ = true;  // MADV_POPULATE_READ works here (cleared on EINVAL)
  std::function<Status(const char*)> fault_;
  uint64_t spills_ = 0, write_bytes_ = 0, io_errors_ = 0;
  double write_seconds_ = 0;
  mutable std::atomic<uint64_t> read_bytes_{0}, checked_bytes_{0}, checksum_failures_{0};
  uint64_t reported_failures_ = 0;  // checksum_failures_ at the last take_corrupt()
};

}  // namespace hz
