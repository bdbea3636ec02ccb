// RecordKeys: the keyed hashing of the remote KV tier. From the secret the replicas share it derives
// two HMAC-SHA256 keys: one names blocks (a chain key per full block, so the names in a shared store
// can be neither predicted nor collided by a client), one authenticates records (a MAC over the
// Redis key and the record, so whoever can write to the store without the secret cannot poison a
// replica, nor move a genuine record under another key). Thread-safe (no mutable state).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvstore/record.h"

namespace hz::kvstore {

using ChainKey = std::array<uint8_t, 16>;  // leading bytes of an HMAC-SHA256; all zero: before block 0
using Mac = std::array<uint8_t, 32>;       // HMAC-SHA256

inline constexpr size_t kMacBytes = 32;

class RecordKeys {
 public:
  explicit RecordKeys(std::string_view secret);

  // Key of a full block of `num_tokens` ids after the block keyed `parent`, under `fp`.
  ChainKey chain_key(const Fingerprint& fp, const ChainKey& parent, const int32_t* tokens, uint32_t num_tokens) const;
  // MAC of `record` stored under Redis key `name`.
  Mac mac(std::string_view name, const uint8_t* record, size_t len) const;
  // Constant-time check of `mac` (kMacBytes bytes) against mac(name, record, len).
  bool verify(std::string_view name, const uint8_t* record, size_t len, const uint8_t* mac) const;

 private:
  std::array<uint8_t, 32> name_key_{};
  std::array<uint8_t, 32> mac_key_{};
};

// First 8 bytes of a chain key, little-endian (the record header's block_hash / parent_hash).
uint64_t chain_key_u64(const ChainKey& k);
std::string chain_key_hex(const ChainKey& k);

}  // namespace hz::kvstore
