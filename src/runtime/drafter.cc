#include "runtime/drafter.h"

#include <algorithm>

namespace hz {

void NgramDrafter::propose(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>* draft) {
  draft->clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0 || len < 2) return;
  const int64_t lo = std::max<int64_t>(0, len - o_.window);
  const int32_t cap = static_cast<int32_t>(std::min<int64_t>(o_.max_ngram, len - 1));
  const int32_t last = tokens[len - 1];
  // One pass, latest candidate first: a candidate is a position `end` (< len - 1, so a
  // continuation follows) whose token equals the last one; its agreement is how many tokens
  // before and at it equal the sequence's last ones, up to `cap`. The longest agreement wins,
  // the latest on ties (what a scan for the longest suffix first, latest match first, finds).
  int64_t best_end = -1;
  int32_t best = 0;
  for (int64_t end = len - 2; end >= lo && best < cap; --end) {
    if (tokens[end] != last) continue;
    int32_t n = 1;
    while (n < cap && end - n >= lo && tokens[end - n] == tokens[len - 1 - n]) ++n;
    if (n > best) {
      best = n;
      best_end = end;
    }
  }
  if (best_end < 0 || best < std::max(1, o_.min_ngram)) return;
  const int64_t from = best_end + 1;
  const int64_t count = std::min<int64_t>(max_tokens, len - from);
  draft->assign(tokens.begin() + from, tokens.begin() + from + count);
}

}  // namespace hz
