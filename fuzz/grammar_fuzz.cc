// libFuzzer target for the grammar parser and matcher. The input is grammar text up to the first
// NUL byte, then text to match. Checks: no crash or hang; a parsed grammar matches any text within
// the matcher's limits; token masks and advancing over a small byte vocabulary terminate.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/token_matcher.h"

namespace {

std::shared_ptr<const hz::grammar::TokenVocab> vocab() {
  static std::shared_ptr<const hz::grammar::TokenVocab> v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    for (const char* s : {"ab", "{\"", "\":", "\xE2\x98", "true", " ", "12"}) pieces.emplace_back(s);
    pieces.emplace_back();  // EOS
    std::vector<int32_t> eog = {static_cast<int32_t>(pieces.size() - 1)};
    return std::make_shared<const hz::grammar::TokenVocab>(std::move(pieces), std::move(eog));
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  std::string_view text = in.substr(0, nul);
  std::string_view input = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  hz::grammar::GrammarLimits lim;
  lim.max_elements = 20000;
  lim.max_repetition = 200;
  auto g = hz::grammar::Grammar::parse(text, lim);
  if (!g.ok()) {
    if (g.status().message().empty()) __builtin_trap();
    return 0;
  }
  (void)g->accepts(input);
  auto tg = std::make_shared<const hz::grammar::TokenGrammar>(std::move(g).value(), vocab());
  hz::grammar::GrammarMatcher m(tg);
  std::vector<uint64_t> bits(tg->mask_words());
  for (size_t i = 0; i < input.size() && i < 64; ++i) {
    m.fill_mask(bits.data());
    const uint8_t b = static_cast<uint8_t>(input[i]);
    const bool allowed = (bits[b >> 6] >> (b & 63)) & 1;
    if (!allowed || !m.accept(b)) break;
  }
  return 0;
}
