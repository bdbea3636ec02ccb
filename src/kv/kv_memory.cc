#include "kv/kv_memory.h"

#include <fmt/format.h>

namespace hz {

std::string KvMemory::summary() const {
  return fmt::format(
      "KV {}: {:.1f} bytes/token; arena {} blocks x {} B = {} B ({} used, {} cached); staging {} x {} B ({} in use)",
      kv_precision_name(precision), arena_bytes_per_token(), arena.blocks_total, arena.bytes_per_block,
      arena.bytes_reserved(), arena.blocks_in_use, arena.blocks_cached, staging.blocks_total, staging.bytes_per_block,
      staging.blocks_in_use);
}

}  // namespace hz
