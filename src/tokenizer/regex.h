// A compiled PCRE2 pattern for pre-tokenization: UTF-8 with Unicode properties (PCRE2_UTF |
// PCRE2_UCP), invalid UTF-8 allowed in subjects (it never matches), JIT-compiled when available.
// Patterns are compiled once per process (cache); matching is const and thread-safe (per-thread
// match data).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

struct pcre2_real_code_8;

namespace hz {

class Regex {
 public:
  // Compiles `pattern` or returns the cached compilation.
  static Result<std::shared_ptr<const Regex>> get(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The first match in subject[start..): true and its byte range [*begin, *end), or false. The
  // subject's end is the end of text for lookaheads and `$`. A match error (resource limits)
  // counts as no match, so the rest of the subject stays one unsplit piece.
  bool find(std::string_view subject, size_t start, size_t* begin, size_t* end) const;

  const std::string& pattern() const { return pattern_; }
  bool jit() const { return jit_; }

 private:
  Regex(std::string pattern, pcre2_real_code_8* code, bool jit) : pattern_(std::move(pattern)), code_(code), jit_(jit) {}
  std::string pattern_;
  pcre2_real_code_8* code_;
  bool jit_;
};

}  // namespace hz
