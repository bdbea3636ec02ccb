#include "runtime/drafter.h"

#include <algorithm>

namespace hz {

void NgramDrafter::propose(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>* draft) {
  draft->clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0) return;
  const int64_t lo = std::max<int64_t>(0, len - o_.window);
  for (int32_t n = std::min<int64_t>(o_.max_ngram, len - 1); n >= std::max(1, o_.min_ngram); --n) {
    const int32_t* suffix = tokens.data() + len - n;
    // Latest match first: start positions s with tokens[s, s + n) == suffix and s + n < len (a
    // continuation exists), excluding the suffix itself.
    for (int64_t s = len - n - 1; s >= lo; --s) {
      if (tokens[s + n - 1] != suffix[n - 1] || !std::equal(suffix, suffix + n, tokens.data() + s)) continue;
      const int64_t from = s + n;
      const int64_t count = std::min<int64_t>(max_tokens, len - from);
      draft->assign(tokens.begin() + from, tokens.begin() + from + count);
      return;
    }
  }
}

}  // namespace hz
