// Drafters for speculative decoding: they propose the tokens that probably follow a sequence, and
// the engine verifies them all in one forward pass (runtime/local_engine.cc). A drafter only
// guesses; a wrong guess costs time, never output. NgramDrafter is prompt lookup: the continuation
// of the latest earlier occurrence of the sequence's last n tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hz {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends up to `max_tokens` proposed continuations of `tokens` (prompt + output so far) to
  // `draft` (cleared first); none when it has no guess. Engine thread only.
  virtual void propose(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>* draft) = 0;
};

struct NgramDrafterOptions {
  int32_t max_ngram = 16;  // the longest agreement looked for
  int32_t min_ngram = 2;   // the shortest tried (1 drafts after any repeated token: many misses)
  // Tokens searched back from the end (bounds the work per step on long contexts).
  int32_t window = 8192;
};

// Prompt lookup: the earlier position where the most of the sequence's last tokens (at least
// min_ngram, at most max_ngram) occur again, the latest on ties; the draft is what followed there.
// Stateless (one backward scan of the window per call), so one instance serves every sequence.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(const NgramDrafterOptions& o) : o_(o) {}
  void propose(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>* draft) override;

 private:
  NgramDrafterOptions o_;
};

}  // namespace hz
