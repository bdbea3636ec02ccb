// A half-open byte range [begin, end) of a string, e.g. the parts of a rendered chat prompt that
// came from message contents (the tokenizer then parses no special tokens there).
#pragma once

#include <cstddef>

namespace hz {

struct TextRange {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const TextRange&) const = default;
};

}  // namespace hz
