// libFuzzer target for the KV disk tier's parsers, which read bytes from disk that may be torn,
// corrupt or hostile: the index log replay and the block record parser (and the payload
// decompressors behind it). Any input must give a result or an error, never a crash or an
// out-of-bounds read. The first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvstore/block_codec.h"
#include "kvstore/record.h"
#include "kvstore/store_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 3;
  data += 1;
  size -= 1;
  // Copies so ASan sees the exact bounds.
  std::vector<uint8_t> buf(data, data + size);
  if (mode == 0) {
    auto r = hz::kvstore::replay_index(buf.data(), buf.size());
    if (!r.ok()) {
      if (r.status().message().empty()) __builtin_trap();
      return 0;
    }
    if (r->valid_bytes > buf.size() || r->valid_bytes < hz::kvstore::kIndexHeaderBytes) __builtin_trap();
    if (r->entries.size() > r->num_records) __builtin_trap();
  } else if (mode == 1) {
    // Records are checked against a fingerprint; the fuzzer must be able to reach past the
    // checksum, so a mismatch in the fingerprint only is still a rejection of a parsed record.
    auto r = hz::kvstore::parse_record(buf.data(), buf.size(), {0, 0});
    if (!r.ok()) {
      if (r.status().message().empty()) __builtin_trap();
      return 0;
    }
    const auto& m = r->meta;
    if (hz::kvstore::record_bytes(m.token_count, m.payload_len) > buf.size()) __builtin_trap();
    if (m.raw_len <= (1u << 20)) {
      std::vector<uint8_t> out(m.raw_len);
      (void)hz::kvstore::decompress(m.codec, r->payload, m.payload_len, out.data(), out.size());
    }
  } else {
    // Decompressors on arbitrary payloads with a claimed raw size.
    if (size < 3) return 0;
    const auto codec = static_cast<hz::kvstore::Codec>(buf[0] % 3);
    const size_t raw = (static_cast<size_t>(buf[1]) << 8 | buf[2]) * 4;
    std::vector<uint8_t> out(raw);
    std::vector<uint8_t> payload(buf.begin() + 3, buf.end());
    (void)hz::kvstore::decompress(codec, payload.data(), payload.size(), out.data(), out.size());
  }
  return 0;
}
