#include "kvstore/fingerprint.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <cstring>

#include "base/progress.h"

namespace hz::kvstore {

namespace {

class Hasher {
 public:
  Hasher() { XXH3_128bits_reset(&st_); }
  void bytes(const void* p, size_t n) {
    u64(n);  // length-prefixed, so concatenations cannot collide
    XXH3_128bits_update(&st_, p, n);
  }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  void u64(uint64_t v) { XXH3_128bits_update(&st_, &v, sizeof(v)); }
  Fingerprint done() {
    XXH128_hash_t h = XXH3_128bits_digest(&st_);
    return {h.low64, h.high64};
  }

 private:
  XXH3_state_t st_;
};

void hash_value(Hasher& h, const GgufValue& v) {
  h.u64(static_cast<uint64_t>(v.type));
  h.u64(v.u);
  h.u64(static_cast<uint64_t>(v.i));
  uint64_t fbits;
  std::memcpy(&fbits, &v.f, 8);
  h.u64(fbits);
  h.u64(v.b ? 1 : 0);
  h.str(v.str);
  if (v.arr) {
    h.u64(static_cast<uint64_t>(v.arr->elem_type));
    h.u64(v.arr->count);
    h.bytes(v.arr->raw.data(), v.arr->raw.size());
    h.u64(v.arr->strings.size());
    for (const std::string& s : v.arr->strings) h.str(s);
    h.u64(v.arr->nested.size());
    for (const GgufValue& n : v.arr->nested) hash_value(h, n);
  }
}

}  // namespace

WeightsDigest digest_weights(const GgufFile& file, uint64_t full_hash_limit) {
  WeightsDigest d;
  Hasher h;
  h.u64(file.file_size());
  h.u64(file.metadata().size());
  for (const auto& [key, value] : file.metadata()) {
    h.str(key);
    hash_value(h, value);
  }
  uint64_t total = 0;
  for (const TensorInfo& t : file.tensors()) total += t.num_bytes;
  d.full = total <= full_hash_limit;
  h.u64(d.full ? 1 : 0);
  uint64_t hashed = 0;  // progress: a full hash reads every byte of the weights
  for (const TensorInfo& t : file.tensors()) {
    if (d.full) report_progress("hashing weights for the KV store", hashed += t.num_bytes, total);
    h.str(t.name);
    h.u64(static_cast<uint64_t>(t.dtype));
    h.u64(t.dims.size());
    for (uint64_t x : t.dims) h.u64(x);
    h.u64(t.offset);
    h.u64(t.num_bytes);
    if (t.data == nullptr) continue;
    if (d.full || t.num_bytes <= 16384) {
      h.bytes(t.data, t.num_bytes);
      continue;
    }
    const uint64_t w = 4096;
    h.bytes(t.data, w);
    h.bytes(t.data + (t.num_bytes / 2 - w / 2), w);
    h.bytes(t.data + t.num_bytes - w, w);
    for (uint64_t k = 0; k < 16; ++k) h.bytes(t.data + (t.num_bytes - 256) * k / 16, 256);
  }
  d.digest = h.done();
  return d;
}

Fingerprint make_fingerprint(const FingerprintInputs& in) {
  Hasher h;
  h.str("horizon-kv-v1");
  h.u64(in.weights.digest.lo);
  h.u64(in.weights.digest.hi);
  h.str(in.tokenizer);
  h.str(in.rope);
  h.str(in.kv_type);
  h.u64(in.block_tokens);
  h.str(in.identity);
  return h.done();
}

}  // namespace hz::kvstore
