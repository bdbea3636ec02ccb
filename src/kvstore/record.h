// The on-disk formats of the KV store: a block record (header + token ids + payload, checksummed)
// and the fingerprint that keys everything. Parsers take untrusted bytes and never read past them.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "kvstore/block_codec.h"

namespace hz::kvstore {

// What makes KV reusable, digested (see kvstore/fingerprint.h). Two stores or records with
// different fingerprints never exchange blocks.
struct Fingerprint {
  uint64_t lo = 0, hi = 0;
  bool operator==(const Fingerprint& o) const { return lo == o.lo && hi == o.hi; }
  bool operator!=(const Fingerprint& o) const { return !(*this == o); }
  std::string hex() const;  // 32 hex digits, hi first
};

inline constexpr uint32_t kRecordMagic = 0x424b5a48;  // "HZKB"
inline constexpr uint16_t kRecordVersion = 1;
inline constexpr size_t kRecordHeaderBytes = 64;

// Fields of a block record. The payload is the block's arena bytes (all layers' K and V planes in
// the cache's element type), compressed with `codec`.
struct RecordMeta {
  Fingerprint fingerprint;
  uint64_t block_hash = 0;
  uint64_t parent_hash = 0;  // 0 for the first block of a prompt
  uint8_t kv_type = 0;       // hz::KvType of the payload
  Codec codec = Codec::kNone;
  uint32_t token_count = 0;
  uint32_t payload_len = 0;  // stored (compressed) bytes
  uint64_t raw_len = 0;      // bytes after decompression
  uint64_t checksum = 0;     // XXH3-64 of the header (checksum field zero), token ids and payload
};

inline size_t record_bytes(uint32_t token_count, uint32_t payload_len) {
  return kRecordHeaderBytes + 4 * static_cast<size_t>(token_count) + payload_len;
}

// Writes a record into `out` (record_bytes(...) bytes) and returns its checksum (also stored).
uint64_t write_record(RecordMeta meta, const int32_t* tokens, const uint8_t* payload, uint8_t* out);

struct RecordView {
  RecordMeta meta;
  const int32_t* tokens = nullptr;  // unaligned-safe only on x86; copy before use elsewhere
  const uint8_t* payload = nullptr;
};
// Parses and verifies a record from `avail` bytes: magic, version, codec, sizes, checksum and the
// expected fingerprint. kDataLoss names what failed.
Result<RecordView> parse_record(const uint8_t* data, size_t avail, const Fingerprint& expected);

}  // namespace hz::kvstore
