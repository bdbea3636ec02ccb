// BlockCodec: compresses and decompresses the payload of one KV block record (zstd, lz4 or stored
// as is). The codec byte is part of every record, so a store may hold records of several codecs.
// Measured on KV blocks of a trained model (bench/kv_disk_codec_bench.cc): lz4 saves nothing
// (ratio >= 0.999: float mantissas are noise to an LZ matcher, and lz4 has no entropy coder); zstd
// level 1 stores 0.82 (bf16) .. 0.97 (int4) of the bytes at ~0.5 GB/s encode and ~1 GB/s decode per
// core. Slots are fixed-size, so compression saves I/O, not capacity: it pays only on storage
// slower than zstd's decoder. Hence the default is none; --kv-disk-codec zstd for slow disks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace hz::kvstore {

enum class Codec : uint8_t { kNone = 0, kZstd = 1, kLz4 = 2 };

const char* codec_name(Codec c);                         // "none", "zstd", "lz4"
std::optional<Codec> codec_from_name(std::string_view name);

// Compressed size bound for `raw_len` bytes (the scratch a caller reserves).
size_t compress_bound(Codec c, size_t raw_len);

// Compresses src into dst (resized to the output). When the result would not be smaller than the
// input, returns kNone and copies the bytes: a record never grows past its raw size.
Codec compress(Codec c, int level, const uint8_t* src, size_t len, std::vector<uint8_t>* dst);

// Decompresses exactly `raw_len` bytes into dst. Errors (not crashes) on malformed input.
Status decompress(Codec c, const uint8_t* src, size_t len, uint8_t* dst, size_t raw_len);

}  // namespace hz::kvstore
