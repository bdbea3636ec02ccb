#include "kvstore/record.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <fmt/format.h>

#include <cstring>

#include "kvstore/byte_io.h"

namespace hz::kvstore {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store's formats are little-endian");

std::string Fingerprint::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

namespace {

// Header layout (little-endian): magic u32, version u16, codec u8, kv_type u8, fp.lo u64, fp.hi u64,
// block_hash u64, parent_hash u64, token_count u32, payload_len u32, raw_len u64, checksum u64.
constexpr size_t kChecksumOffset = 56;

uint64_t record_checksum(const uint8_t* rec, size_t len) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, rec, kChecksumOffset);
  const uint64_t zero = 0;
  XXH3_64bits_update(&st, &zero, 8);
  XXH3_64bits_update(&st, rec + kRecordHeaderBytes, len - kRecordHeaderBytes);
  return XXH3_64bits_digest(&st);
}

}  // namespace

uint64_t write_record(RecordMeta m, const int32_t* tokens, const uint8_t* payload, uint8_t* out) {
  put<uint32_t>(out, 0, kRecordMagic);
  put<uint16_t>(out, 4, kRecordVersion);
  put<uint8_t>(out, 6, static_cast<uint8_t>(m.codec));
  put<uint8_t>(out, 7, m.kv_type);
  put<uint64_t>(out, 8, m.fingerprint.lo);
  put<uint64_t>(out, 16, m.fingerprint.hi);
  put<uint64_t>(out, 24, m.block_hash);
  put<uint64_t>(out, 32, m.parent_hash);
  put<uint32_t>(out, 40, m.token_count);
  put<uint32_t>(out, 44, m.payload_len);
  put<uint64_t>(out, 48, m.raw_len);
  put<uint64_t>(out, kChecksumOffset, 0);
  std::memcpy(out + kRecordHeaderBytes, tokens, 4 * static_cast<size_t>(m.token_count));
  std::memcpy(out + kRecordHeaderBytes + 4 * static_cast<size_t>(m.token_count), payload, m.payload_len);
  const uint64_t sum = record_checksum(out, record_bytes(m.token_count, m.payload_len));
  put<uint64_t>(out, kChecksumOffset, sum);
  return sum;
}

Result<RecordView> parse_record(const uint8_t* data, size_t avail, const Fingerprint& expected) {
  if (avail < kRecordHeaderBytes) return data_loss("record: {} bytes, shorter than its header", avail);
  RecordView v;
  RecordMeta& m = v.meta;
  if (get<uint32_t>(data, 0) != kRecordMagic) return data_loss("record: bad magic");
  if (get<uint16_t>(data, 4) != kRecordVersion) return data_loss("record: version {} is not {}", get<uint16_t>(data, 4), kRecordVersion);
  const uint8_t codec = get<uint8_t>(data, 6);
  if (codec > static_cast<uint8_t>(Codec::kLz4)) return data_loss("record: unknown codec {}", codec);
  m.codec = static_cast<Codec>(codec);
  m.kv_type = get<uint8_t>(data, 7);
  m.fingerprint.lo = get<uint64_t>(data, 8);
  m.fingerprint.hi = get<uint64_t>(data, 16);
  m.block_hash = get<uint64_t>(data, 24);
  m.parent_hash = get<uint64_t>(data, 32);
  m.token_count = get<uint32_t>(data, 40);
  m.payload_len = get<uint32_t>(data, 44);
  m.raw_len = get<uint64_t>(data, 48);
  m.checksum = get<uint64_t>(data, kChecksumOffset);
  // 64-bit arithmetic: the 32-bit fields cannot overflow it.
  const uint64_t need = kRecordHeaderBytes + 4 * static_cast<uint64_t>(m.token_count) + m.payload_len;
  if (need > avail) return data_loss("record: token_count {} and payload_len {} exceed the {} bytes of its slot", m.token_count, m.payload_len, avail);
  if (m.codec == Codec::kNone && m.raw_len != m.payload_len) return data_loss("record: stored payload_len {} != raw_len {}", m.payload_len, m.raw_len);
  if (record_checksum(data, need) != m.checksum) return data_loss("record: checksum mismatch (torn or corrupt)");
  if (m.fingerprint != expected) return data_loss("record: fingerprint {} is not the store's {}", m.fingerprint.hex(), expected.hex());
  v.tokens = reinterpret_cast<const int32_t*>(data + kRecordHeaderBytes);
  v.payload = data + kRecordHeaderBytes + 4 * static_cast<size_t>(m.token_count);
  return v;
}

}  // namespace hz::kvstore
