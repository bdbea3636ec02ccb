#include "kvstore/block_codec.h"

#include <lz4.h>
#include <zstd.h>

#include <cstring>
#include <memory>

namespace hz::kvstore {

namespace {

// One context per thread, freed with the thread: creating a context per block would cost more
// than compressing it.
struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};
ZSTD_CCtx* cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> c(ZSTD_createCCtx());
  return c.get();
}
ZSTD_DCtx* dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> c(ZSTD_createDCtx());
  return c.get();
}

}  // namespace

const char* codec_name(Codec c) {
  switch (c) {
    case Codec::kNone: return "none";
    case Codec::kZstd: return "zstd";
    case Codec::kLz4: return "lz4";
  }
  return "?";
}

std::optional<Codec> codec_from_name(std::string_view name) {
  if (name == "none") return Codec::kNone;
  if (name == "zstd") return Codec::kZstd;
  if (name == "lz4") return Codec::kLz4;
  return std::nullopt;
}

size_t compress_bound(Codec c, size_t raw_len) {
  switch (c) {
    case Codec::kNone: return raw_len;
    case Codec::kZstd: return ZSTD_compressBound(raw_len);
    case Codec::kLz4: return static_cast<size_t>(LZ4_compressBound(static_cast<int>(raw_len)));
  }
  return raw_len;
}

Codec compress(Codec c, int level, const uint8_t* src, size_t len, std::vector<uint8_t>* dst) {
  size_t n = 0;
  if (c == Codec::kZstd) {
    dst->resize(ZSTD_compressBound(len));
    n = ZSTD_compressCCtx(cctx(), dst->data(), dst->size(), src, len, level);
    if (ZSTD_isError(n)) n = 0;
  } else if (c == Codec::kLz4 && len <= static_cast<size_t>(LZ4_MAX_INPUT_SIZE)) {
    dst->resize(static_cast<size_t>(LZ4_compressBound(static_cast<int>(len))));
    // Level > 1 means acceleration for lz4 (faster, less compression); 1 is the default.
    int r = LZ4_compress_fast(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst->data()),
                              static_cast<int>(len), static_cast<int>(dst->size()), level > 1 ? level : 1);
    n = r > 0 ? static_cast<size_t>(r) : 0;
  }
  if (n == 0 || n >= len) {
    dst->assign(src, src + len);
    return Codec::kNone;
  }
  dst->resize(n);
  return c;
}

Status decompress(Codec c, const uint8_t* src, size_t len, uint8_t* dst, size_t raw_len) {
  switch (c) {
    case Codec::kNone:
      if (len != raw_len) return data_loss("stored payload has {} bytes, expected {}", len, raw_len);
      if (len > 0) std::memcpy(dst, src, len);  // an empty payload may come with null pointers
      return Status();
    case Codec::kZstd: {
      size_t n = ZSTD_decompressDCtx(dctx(), dst, raw_len, src, len);
      if (ZSTD_isError(n)) return data_loss("zstd payload: {}", ZSTD_getErrorName(n));
      if (n != raw_len) return data_loss("zstd payload decodes to {} bytes, expected {}", n, raw_len);
      return Status();
    }
    case Codec::kLz4: {
      if (len > static_cast<size_t>(INT32_MAX) || raw_len > static_cast<size_t>(INT32_MAX))
        return data_loss("lz4 payload too large");
      int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst),
                                  static_cast<int>(len), static_cast<int>(raw_len));
      if (n < 0 || static_cast<size_t>(n) != raw_len) return data_loss("lz4 payload is malformed or decodes to the wrong size");
      return Status();
    }
  }
  return data_loss("unknown codec {}", static_cast<int>(c));
}

}  // namespace hz::kvstore
