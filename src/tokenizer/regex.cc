#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>
#include <mutex>

namespace hz {
namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

// One ovector pair is enough: only the overall match is used (groups are not captured).
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create(1, nullptr));
  return md.get();
}

}  // namespace

Result<std::shared_ptr<const Regex>> Regex::get(const std::string& pattern) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Regex>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(pattern);
  if (it != cache.end()) return it->second;

  int err = 0;
  PCRE2_SIZE err_offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                                   &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return invalid_argument("pre-tokenizer regex '{}': {} at offset {}", pattern, reinterpret_cast<char*>(msg),
                            err_offset);
  }
  bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  std::shared_ptr<const Regex> re(new Regex(pattern, code, jit));
  cache.emplace(pattern, re);
  return re;
}

Regex::~Regex() { pcre2_code_free(code_); }

bool Regex::find(std::string_view subject, size_t start, size_t* begin, size_t* end) const {
  pcre2_match_data* md = thread_match_data();
  auto subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = pcre2_match(code_, subj, subject.size(), start, 0, md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // The interpreter keeps its backtracking state on the heap; retry there.
    rc = pcre2_match(code_, subj, subject.size(), start, PCRE2_NO_JIT, md, nullptr);
  }
  if (rc < 0) return false;
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  *begin = ov[0];
  *end = ov[1];
  return true;
}

}  // namespace hz
