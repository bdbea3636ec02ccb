#include "bench/spec_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "runtime/drafter.h"
#include "runtime/local_engine.h"

namespace hz::bench {
namespace {

// Proposes the true continuation of a known token sequence; each proposed token is replaced by
// another with probability `fail_rate` (a seeded generator, so runs repeat).
class OracleDrafter : public Drafter {
 public:
  OracleDrafter(std::vector<int32_t> truth, int32_t vocab, double fail_rate, uint64_t seed)
      : truth_(std::move(truth)), vocab_(vocab), fail_(fail_rate), state_(seed) {}

  void propose(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>* draft) override {
    draft->clear();
    const size_t len = tokens.size();
    if (len == 0 || len > truth_.size() || tokens[len - 1] != truth_[len - 1]) return;
    for (size_t p = len; p < truth_.size() && static_cast<int32_t>(draft->size()) < max_tokens; ++p) {
      int32_t t = truth_[p];
      if (uniform() < fail_) t = (t + 1) % vocab_;
      draft->push_back(t);
    }
  }

 private:
  double uniform() {  // splitmix64
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
  }

  std::vector<int32_t> truth_;
  int32_t vocab_;
  double fail_;
  uint64_t state_;
};

class WaitSink : public GenerationSink {
 public:
  void on_event(GenerationEvent ev) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (ev.kind == GenerationEvent::Kind::kTokens) {
      ids_.insert(ids_.end(), ev.token_ids.begin(), ev.token_ids.end());
      return;
    }
    final_ = std::move(ev);
    done_ = true;
    cv_.notify_all();
  }
  std::pair<std::vector<int32_t>, GenerationEvent> wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return done_; });
    return {ids_, final_};
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<int32_t> ids_;
  GenerationEvent final_;
};

struct RunResult {
  std::vector<int32_t> ids;
  double seconds = 0;  // first to last token
};

Result<RunResult> generate(LocalEngine& e, const std::vector<int32_t>& prompt, int32_t n, bool speculate = true) {
  GenerationRequest r;
  r.prompt = prompt;
  r.speculate = speculate;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = n;
  r.sampling.ignore_eos = true;
  auto sink = std::make_shared<WaitSink>();
  r.sink = sink;
  HZ_RETURN_IF_ERROR(e.submit(std::move(r)).status());
  auto [ids, fin] = sink->wait();
  if (fin.finish_reason == FinishReason::kError) return fin.error;
  RunResult out;
  out.ids = std::move(ids);
  out.seconds = fin.decode_seconds;
  return out;
}

}  // namespace

Result<SpecBenchReport> run_spec_bench(const SpecBenchOptions& o, const SpecProgressFn& progress) {
  if (o.drafter != "ngram" && o.drafter != "oracle" && o.drafter != "none")
    return invalid_argument("--drafter '{}' is not one of ngram, oracle, none", o.drafter);
  if (o.rounds < 1) return invalid_argument("--rounds must be at least 1");
  if (o.reps < 1) return invalid_argument("--reps must be at least 1");
  if (o.gen_tokens < 2) return invalid_argument("-n must be at least 2");
  if (!(o.fail_rate >= 0 && o.fail_rate <= 1)) return invalid_argument("--fail-rate must be in [0, 1]");
  EngineOptions base = o.engine;
  base.max_num_seqs = 1;
  base.spec = SpecMode::kOff;
  HZ_ASSIGN_OR_RETURN(auto plain, LocalEngine::create(base));
  const int32_t vocab = plain->model_info().vocab_size;
  std::vector<int32_t> prompt;
  if (!o.prompt.empty()) {
    prompt = plain->tokenize(o.prompt, true, false);
  } else {
    if (o.prompt_tokens < 1) return invalid_argument("--prompt-tokens must be at least 1");
    uint64_t x = o.seed * 2 + 1;
    for (int32_t i = 0; i < o.prompt_tokens; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      prompt.push_back(static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(vocab)));
    }
  }
  if (progress) progress("plain decoding: the reference output");
  HZ_ASSIGN_OR_RETURN(const RunResult truth, generate(*plain, prompt, o.gen_tokens));

  EngineOptions so = o.engine;
  so.max_num_seqs = 1;
  if (o.drafter == "oracle") {
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), truth.ids.begin(), truth.ids.end());
    so.spec = SpecMode::kOff;
    so.spec_adaptive = false;  // fixed-length drafts: the cost of the rule itself
    so.drafter = std::make_shared<OracleDrafter>(std::move(seq), vocab, o.fail_rate, o.seed);
  } else if (o.drafter == "ngram") {
    so.spec = SpecMode::kNgram;
  } else {
    so.spec = SpecMode::kOff;  // the control: no drafter, both sides plain
  }
  // Both sides run on this one engine (the plain runs with drafting off): two engines would hold
  // two copies of the weights, and the second copy decoded 3-4% slower than the first in an A/A
  // run (--drafter none), a bias against speculation.
  plain.reset();
  HZ_ASSIGN_OR_RETURN(auto spec, LocalEngine::create(so));
  if (progress) progress("warm-up");
  HZ_RETURN_IF_ERROR(generate(*spec, prompt, o.gen_tokens).status());

  SpecBenchReport rep;
  rep.prompt_tokens = static_cast<int64_t>(prompt.size());
  rep.gen_tokens = o.gen_tokens;
  std::vector<double> ratios;
  uint64_t drafted = 0, accepted = 0;
  for (int32_t r = 0; r < o.rounds; ++r) {
    if (progress) progress(fmt::format("round {}/{}", r + 1, o.rounds));
    SpecBenchRound round;
    const EngineStats before = spec->stats();
    // `reps` pairs back to back, alternating which side goes first, so a drift in the machine's
    // speed does not favour one; the round's rates are tokens over time summed over its runs.
    double plain_s = 0, spec_s = 0, plain_n = 0, spec_n = 0;
    for (int32_t k = 0; k < 2 * o.reps; ++k) {
      const bool run_plain = (k % 2 == 0) == ((r + k / 2) % 2 == 0);
      HZ_ASSIGN_OR_RETURN(RunResult x, generate(*spec, prompt, o.gen_tokens, /*speculate=*/!run_plain));
      rep.identical = rep.identical && x.ids == truth.ids;
      (run_plain ? plain_s : spec_s) += x.seconds;
      (run_plain ? plain_n : spec_n) += static_cast<double>(x.ids.size() - 1);
    }
    spec->wait_idle(std::chrono::seconds(10));  // counters are published after the step
    const EngineStats after = spec->stats();
    round.plain_tps = plain_s > 0 ? plain_n / plain_s : 0;
    round.spec_tps = spec_s > 0 ? spec_n / spec_s : 0;
    round.ratio = round.plain_tps > 0 ? round.spec_tps / round.plain_tps : 0;
    round.drafted = after.spec_draft_tokens_total - before.spec_draft_tokens_total;
    round.accepted = after.spec_accepted_tokens_total - before.spec_accepted_tokens_total;
    drafted += round.drafted;
    accepted += round.accepted;
    ratios.push_back(round.ratio);
    rep.rounds.push_back(round);
  }
  rep.ratio = summarize(ratios);
  rep.acceptance = drafted == 0 ? 0.0 : static_cast<double>(accepted) / drafted;
  return rep;
}

std::string SpecBenchReport::to_text() const {
  std::string out = fmt::format("prompt {} tokens, {} generated (greedy)\n{:<6} {:>12} {:>12} {:>8} {:>9} {:>9}\n",
                                prompt_tokens, gen_tokens, "round", "plain t/s", "spec t/s", "ratio", "drafted", "accepted");
  for (size_t i = 0; i < rounds.size(); ++i) {
    const SpecBenchRound& r = rounds[i];
    out += fmt::format("{:<6} {:>12.1f} {:>12.1f} {:>8.3f} {:>9} {:>9}\n", i + 1, r.plain_tps, r.spec_tps, r.ratio, r.drafted,
                       r.accepted);
  }
  out += fmt::format("speed-up: median {:.3f}x (min {:.3f}, max {:.3f}) over {} rounds; acceptance {:.1f}%; output {}\n",
                     ratio.median, ratio.min, ratio.max, rounds.size(), 100 * acceptance,
                     identical ? "identical to plain decoding" : "DIFFERS from plain decoding");
  return out;
}

}  // namespace hz::bench
