// Tokenizer throughput on adversarial and ordinary inputs at 64 KiB, 256 KiB and 1 MiB: linear time
// shows as constant bytes/s across sizes. Run: build/bench/tokenizer_bench --benchmark_filter=...
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "base/check.h"
#include "format/gguf.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace hz {
namespace {

const char* const kFamilies[] = {"llama-spm", "gpt-2", "llama-bpe", "deepseek-coder", "falcon", "mpt"};
const char* const kPres[] = {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon", "starcoder",
                             "refact", "mpt", "default"};
const char* const kInputs[] = {"a", "spaces", "newlines", "spaces+x", "random", "spaces+cjk"};

std::string shared_dir() {
  const char* env = std::getenv("HORIZON_SHARED_DIR");
  return env && *env ? env : HORIZON_SHARED_DIR_DEFAULT;
}

const Tokenizer& load(const std::string& family) {
  static std::map<std::string, std::pair<std::unique_ptr<GgufFile>, std::unique_ptr<Tokenizer>>> cache;
  auto it = cache.find(family);
  if (it == cache.end()) {
    auto f = GgufFile::open(shared_dir() + "/testdata/vocab/ggml-vocab-" + family + ".gguf");
    HZ_CHECK(f.ok());
    auto file = std::make_unique<GgufFile>(std::move(f).value());
    auto tok = Tokenizer::from_gguf(*file);
    HZ_CHECK(tok.ok());
    it = cache.emplace(family, std::make_pair(std::move(file), std::move(tok).value())).first;
  }
  return *it->second.second;
}

std::string make_input(int kind, size_t bytes) {
  switch (kind) {
    case 0: return std::string(bytes, 'a');
    case 1: return std::string(bytes, ' ');
    case 2: return std::string(bytes, '\n');
    case 3: return std::string(bytes - 1, ' ') + "x";
    // Spaces before a character no letter or punctuation class takes: the backtracking case for
    // patterns such as DeepSeek LLM's \s+$.
    case 5: return std::string(bytes - 3, ' ') + "\xE4\xB8\xAD";
    default: {
      // Words, digits, punctuation, whitespace runs and multi-byte characters, as in real text.
      std::mt19937 rng(1);
      static const std::pair<uint32_t, uint32_t> kRanges[] = {
          {'a', 'z'}, {'a', 'z'}, {'a', 'z'}, {' ', ' '}, {' ', ' '}, {'0', '9'}, {'!', '/'}, {'\n', '\n'},
          {0xC0, 0xFF}, {0x400, 0x4FF}, {0x4E00, 0x9FA5}, {0x1F300, 0x1F64F}};
      std::string s;
      while (s.size() < bytes) {
        auto [lo, hi] = kRanges[rng() % std::size(kRanges)];
        utf8::append(s, lo + rng() % (hi - lo + 1));
      }
      return s;
    }
  }
}

void BM_Encode(benchmark::State& state) {
  const Tokenizer& tok = load(kFamilies[state.range(0)]);
  std::string text = make_input(static_cast<int>(state.range(1)), static_cast<size_t>(state.range(2)));
  size_t num_tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tok.encode(text, false, false);
    num_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(num_tokens);
  state.SetLabel(std::string(kFamilies[state.range(0)]) + "/" + kInputs[state.range(1)]);
}

void BM_PreTokenize(benchmark::State& state) {
  auto pre = PreTokenizer::create(kPres[state.range(0)]);
  HZ_CHECK(pre.ok());
  std::string text = make_input(static_cast<int>(state.range(1)), static_cast<size_t>(state.range(2)));
  std::vector<std::pair<size_t, size_t>> pieces;
  for (auto _ : state) {
    pieces.clear();
    pre->split(text, pieces);
    benchmark::DoNotOptimize(pieces.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["pieces"] = static_cast<double>(pieces.size());
  state.SetLabel(std::string(kPres[state.range(0)]) + "/" + kInputs[state.range(1)]);
}

void sizes(benchmark::internal::Benchmark* b, int num_first) {
  for (int f = 0; f < num_first; ++f) {
    for (int in = 0; in < static_cast<int>(std::size(kInputs)); ++in) {
      for (int64_t size : {64 << 10, 256 << 10, 1 << 20}) b->Args({f, in, size});
    }
  }
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_Encode)->Apply([](auto* b) { sizes(b, static_cast<int>(std::size(kFamilies))); });
BENCHMARK(BM_PreTokenize)->Apply([](auto* b) { sizes(b, static_cast<int>(std::size(kPres))); });

}  // namespace
}  // namespace hz
