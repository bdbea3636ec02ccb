// Test helper: a block table of pool blocks from their indices.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kv/block_ref.h"

namespace hz {

inline std::vector<BlockRef> pool_refs(std::initializer_list<int32_t> ids) {
  std::vector<BlockRef> out;
  for (int32_t i : ids) out.push_back(BlockRef::pool(i));
  return out;
}

}  // namespace hz
