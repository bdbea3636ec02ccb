// Grammar mask cost per generated token: a JSON schema of 10 fields over a 32K (llama-spm) and a
// 128K (llama-bpe) vocabulary. The tokens of a valid document are fed one by one: each step builds
// the mask (timed) and advances over the token. Per-position tables are built on first use, so the
// first pass over the document (cold_*) pays for them; later passes (mask_us, max_us) reuse them, as
// later requests with the same schema do. precompute_ms: building every table up front instead.
// Run: build/bench/grammar_mask_bench
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <tuple>
#include <map>
#include <memory>
#include <string>

#include "base/check.h"
#include "format/gguf.h"
#include "grammar/json_schema.h"
#include "grammar/token_matcher.h"
#include "tokenizer/tokenizer.h"

namespace hz {
namespace {

const char* kSchema = R"({"type":"object","properties":{
  "id":{"type":"integer","minimum":0,"maximum":1000000},
  "name":{"type":"string"},
  "email":{"type":"string","maxLength":64},
  "age":{"type":"integer","minimum":0,"maximum":150},
  "score":{"type":"number"},
  "active":{"type":"boolean"},
  "role":{"enum":["admin","user","guest"]},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}},"required":["city","zip"],"additionalProperties":false},
  "note":{"anyOf":[{"type":"string"},{"type":"null"}]}},
  "required":["id","name","email","age","score","active","role","tags","address","note"],"additionalProperties":false})";

const char* kDocument =
    R"({"id": 48213, "name": "Ada Lovelace", "email": "ada@example.org", "age": 36, "score": 97.25, "active": true, )"
    R"("role": "admin", "tags": ["math", "engines", "poetry"], "address": {"city": "London", "zip": "W1 2AB"}, )"
    R"("note": "First programmer; wrote notes on the Analytical Engine."})";

struct Setup {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const grammar::TokenGrammar> grammar;
  std::vector<int32_t> doc;
  double precompute_ms = 0;
  double cold_total_us = -1, cold_max_us = 0;  // the first pass ever
};

Setup& setup(const std::string& family) {
  static std::map<std::string, Setup> cache;
  Setup& s = cache[family];
  if (s.grammar) return s;
  const char* env = std::getenv("HORIZON_SHARED_DIR");
  const std::string dir = env && *env ? env : HORIZON_SHARED_DIR_DEFAULT;
  auto f = GgufFile::open(dir + "/testdata/vocab/ggml-vocab-" + family + ".gguf");
  HZ_CHECK(f.ok());
  s.file = std::make_unique<GgufFile>(std::move(f).value());
  auto t = Tokenizer::from_gguf(*s.file);
  HZ_CHECK(t.ok());
  s.tok = std::move(t).value();
  auto text = grammar::json_schema_to_grammar(nlohmann::ordered_json::parse(kSchema));
  HZ_CHECK(text.ok());
  auto g = grammar::Grammar::parse(*text);
  HZ_CHECK(g.ok());
  s.grammar = std::make_shared<const grammar::TokenGrammar>(std::move(g).value(), grammar::TokenVocab::from_tokenizer(*s.tok));
  s.doc = s.tok->encode(kDocument, false, false);
  return s;
}

// One pass over the document: total and worst mask time in microseconds.
std::pair<double, double> run_document(const Setup& s, std::vector<uint64_t>& bits, bool* ok) {
  double total_us = 0, max_us = 0;
  grammar::GrammarMatcher m(s.grammar);
  for (int32_t id : s.doc) {
    const auto t0 = std::chrono::steady_clock::now();
    m.fill_mask(bits.data());
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    total_us += us;
    max_us = std::max(max_us, us);
    if (!((bits[id >> 6] >> (id & 63)) & 1) || !m.accept(id)) {
      *ok = false;
      return {total_us, max_us};
    }
  }
  *ok = m.can_end();
  return {total_us, max_us};
}

void BM_JsonSchemaMask(benchmark::State& state, const std::string& family) {
  Setup& s = setup(family);
  std::vector<uint64_t> bits(s.grammar->mask_words());
  bool ok = true;
  if (s.cold_total_us < 0) std::tie(s.cold_total_us, s.cold_max_us) = run_document(s, bits, &ok);
  if (!ok) {
    state.SkipWithError("a token of the valid document was masked out");
    return;
  }
  double total_us = 0, max_us = 0;
  int64_t tokens = 0;
  for (auto _ : state) {
    const auto [t, mx] = run_document(s, bits, &ok);
    total_us += t;
    max_us = std::max(max_us, mx);
    tokens += static_cast<int64_t>(s.doc.size());
  }
  state.counters["vocab"] = s.tok->vocab_size();
  state.counters["doc_tokens"] = static_cast<double>(s.doc.size());
  state.counters["mask_us"] = total_us / static_cast<double>(tokens);
  state.counters["max_us"] = max_us;
  state.counters["cold_mask_us"] = s.cold_total_us / static_cast<double>(s.doc.size());
  state.counters["cold_max_us"] = s.cold_max_us;
  if (s.precompute_ms == 0) {
    auto fresh = std::make_shared<const grammar::TokenGrammar>(grammar::Grammar(s.grammar->grammar()),
                                                               grammar::TokenVocab::from_tokenizer(*s.tok));
    const auto t0 = std::chrono::steady_clock::now();
    fresh->precompute_all();
    s.precompute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  state.counters["precompute_ms"] = s.precompute_ms;
}

BENCHMARK_CAPTURE(BM_JsonSchemaMask, vocab32k_llama_spm, std::string("llama-spm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_JsonSchemaMask, vocab128k_llama_bpe, std::string("llama-bpe"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hz
