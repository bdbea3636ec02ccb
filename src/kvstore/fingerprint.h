// The fingerprint of what makes KV reusable: the model's weights, its tokenizer and metadata, the
// effective RoPE parameters, the KV element type and block size and the engine's model identity.
// Blocks are only ever served to an engine whose fingerprint equals the one they were written with.
#pragma once

#include <cstdint>
#include <string>

#include "format/gguf.h"
#include "kvstore/record.h"

namespace hz::kvstore {

// Digest of a model file's weights and metadata. Files up to `full_hash_limit` bytes of tensor data
// are hashed in full (XXH3 runs at memory speed: ~0.1 s per GiB from the page cache). Larger files
// get a stable digest instead, so start-up never reads tens of GiB: file size, every metadata
// key/value (this covers the tokenizer: vocabulary, merges, special ids), the tensor directory
// (names, types, shapes, offsets — a re-quantization or re-conversion changes these) and, per
// tensor, its first, middle and last 4 KiB plus 16 strided 256-byte samples. A fine-tune with
// identical shapes changes practically every weight, so the samples catch it; what this digest
// cannot see is an edit confined to unsampled bytes of an otherwise identical file.
struct WeightsDigest {
  Fingerprint digest;
  bool full = false;  // every tensor byte was hashed
};
WeightsDigest digest_weights(const GgufFile& file, uint64_t full_hash_limit = uint64_t{1} << 30);

struct FingerprintInputs {
  WeightsDigest weights;
  std::string tokenizer;    // e.g. vocab size + special ids (the metadata digest covers the rest)
  std::string rope;         // the effective RoPE parameters, after the user's overrides
  std::string kv_type;      // the arena's element type(s)
  uint32_t block_tokens = 0;
  std::string identity;     // architecture, shape (layers, heads, head dim)
};
Fingerprint make_fingerprint(const FingerprintInputs& in);

}  // namespace hz::kvstore
