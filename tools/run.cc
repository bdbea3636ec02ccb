// `horizon run -m MODEL -p PROMPT`: one prompt, the completion streamed to stdout, timings to stderr.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <limits>
#include <mutex>

#include <cstdlib>

#include "base/log.h"
#include "base/mapped_file.h"
#include "runtime/local_engine.h"
#include "tools/cli.h"
#include "tools/config_file.h"
#include "tools/engine_flags.h"
#include "tools/model_sampling.h"
#include "tools/progress.h"

namespace hz::cli {
namespace {

struct RunOptions {
  EngineFlags engine;
  std::string prompt;
  std::string prompt_file;
  int32_t n_predict = 128;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int64_t seed = -1;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool print_logprobs = false;
  // The sampling flags: one not given takes the model's default (general.sampling.*), as llama-cli does.
  const CLI::Option* temperature_flag = nullptr;
  const CLI::Option* top_k_flag = nullptr;
  const CLI::Option* top_p_flag = nullptr;
  const CLI::Option* min_p_flag = nullptr;
  const CLI::Option* repeat_penalty_flag = nullptr;
};

// The model's sampling defaults for the flags not given.
void take_model_sampling_defaults(const Model& model, RunOptions* o) {
  const ModelSampling m = model_sampling(model.file());
  auto take = [](const CLI::Option* flag, const auto& value, auto* out) {
    if (flag != nullptr && flag->count() == 0 && value) *out = *value;
  };
  take(o->temperature_flag, m.temperature, &o->temperature);
  take(o->top_k_flag, m.top_k, &o->top_k);
  take(o->top_p_flag, m.top_p, &o->top_p);
  take(o->min_p_flag, m.min_p, &o->min_p);
  take(o->repeat_penalty_flag, m.repetition_penalty, &o->repeat_penalty);
}

// Prints text as it arrives and wakes the main thread at the end.
class PrintSink : public GenerationSink {
 public:
  void on_event(GenerationEvent ev) override {
    auto now = std::chrono::steady_clock::now();
    if (ev.kind == GenerationEvent::Kind::kTokens) {
      // Exact figures for comparing runs bit for bit: token id and log-probability as a hex float.
      for (size_t i = 0; i < ev.chosen.size(); ++i) {
        std::string line = fmt::format("logprob {} {:a}", ev.chosen[i].token, ev.chosen[i].logprob);
        if (i < ev.top.size()) {
          for (const auto& t : ev.top[i]) line += fmt::format(" {}:{:a}", t.token, t.logprob);
        }
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      if (!ev.token_ids.empty() && first_token_ == std::chrono::steady_clock::time_point{}) first_token_ = now;
      if (!ev.text.empty()) {
        std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
        std::fflush(stdout);
      }
      return;
    }
    std::lock_guard<std::mutex> lk(mu_);
    final_ = std::move(ev);
    end_ = now;
    done_ = true;
    cv_.notify_all();
  }
  GenerationEvent wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return done_; });
    return final_;
  }
  std::chrono::steady_clock::time_point first_token_{}, end_{};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  GenerationEvent final_;
};

int run_prompt(RunOptions o) {  // a copy: the model fills the sampling flags not given
  // stdout is the completion, stderr the timing line: engine info logs only when asked for.
  if (std::getenv("HORIZON_LOG") == nullptr) init_logging("warn");
  if (!o.prompt_file.empty()) {
    if (!o.prompt.empty()) return fail("give the prompt with -p or -f, not both");
  } else if (o.prompt.empty()) {
    return fail("the prompt is empty: give one with -p TEXT or -f FILE");
  }
  std::string prompt = o.prompt;
  if (o.prompt_file == "-") {  // the prompt from stdin
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (prompt.empty()) return fail("-f -: stdin held no prompt");
  } else if (!o.prompt_file.empty()) {
    auto text = read_file(o.prompt_file);
    if (!text.ok()) return fail(text.status().message());
    prompt = *text;
    if (prompt.empty()) return fail(o.prompt_file + ": the prompt file is empty");
  }
  if (o.n_predict < 1 && o.n_predict != -1) return fail("-n must be at least 1 (or -1: until the end of the text or the context)");
  if (!(o.temperature >= 0)) return fail("--temp must be >= 0");
  if (!(o.top_p > 0 && o.top_p <= 1)) return fail("--top-p must be in (0, 1]");
  if (!(o.repeat_penalty > 0 && o.repeat_penalty <= 10))
    return fail(fmt::format("--repeat-penalty must be > 0 and <= 10 (1 = off), got {}", o.repeat_penalty));
  if (!(o.min_p >= 0 && o.min_p <= 1)) return fail("--min-p must be in [0, 1]");
  if (o.top_k < 0) return fail("--top-k must be >= 0");
  auto opts = o.engine.resolve();
  if (!opts.ok()) return fail(opts.status().message());
  EngineOptions eo = *opts;
  eo.max_num_seqs = 1;
  eo.max_queue = 1;
  auto engine = [&] {
    LibraryProgress progress(o.engine.quiet);
    return LocalEngine::create(eo);
  }();
  if (!engine.ok()) return fail(engine.status().message());
  LocalEngine& e = **engine;
  take_model_sampling_defaults(e.model(), &o);

  GenerationRequest req;
  req.prompt = e.tokenize(prompt, /*add_special=*/true, /*parse_special=*/false);
  req.sampling.temperature = o.temperature;
  req.sampling.top_k = o.top_k;
  req.sampling.top_p = o.top_p;
  req.sampling.min_p = o.min_p;
  req.sampling.repetition_penalty = o.repeat_penalty;
  if (o.seed >= 0) req.sampling.seed = static_cast<uint64_t>(o.seed);
  // -1 (llama.cpp's "until the end"): the engine stops at the end of generation or of the context.
  req.sampling.max_tokens = o.n_predict == -1 ? std::numeric_limits<int32_t>::max() : o.n_predict;
  req.sampling.stop = o.stop;
  req.sampling.ignore_eos = o.ignore_eos;
  if (o.print_logprobs) {
    req.sampling.logprobs = true;
    req.sampling.top_logprobs = 5;
  }
  auto sink = std::make_shared<PrintSink>();
  req.sink = sink;
  auto start = std::chrono::steady_clock::now();
  const size_t num_prompt = req.prompt.size();
  auto id = e.submit(std::move(req));
  if (!id.ok()) return fail(id.status().message());
  GenerationEvent fin = sink->wait();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (fin.finish_reason == FinishReason::kError) return fail(fin.error.message());
  double prefill_s = std::chrono::duration<double>(sink->first_token_ - start).count();
  double decode_s = std::chrono::duration<double>(sink->end_ - sink->first_token_).count();
  int decoded = fin.completion_tokens > 1 ? fin.completion_tokens - 1 : 0;
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tokens/s) | generated: %d tokens, %.1f tokens/s | stop: %s\n",
               num_prompt, prefill_s, prefill_s > 0 ? num_prompt / prefill_s : 0.0, fin.completion_tokens,
               decode_s > 0 ? decoded / decode_s : 0.0, finish_reason_name(fin.finish_reason));
  if (eo.spec != SpecMode::kOff) {
    e.wait_idle(std::chrono::seconds(5));  // the counters are published after the step
    const EngineStats st = e.stats();
    std::fprintf(stderr, "speculation: %llu tokens drafted, %llu accepted (%.1f%%), %llu engine steps\n",
                 static_cast<unsigned long long>(st.spec_draft_tokens_total),
                 static_cast<unsigned long long>(st.spec_accepted_tokens_total),
                 st.spec_draft_tokens_total == 0 ? 0.0 : 100.0 * st.spec_accepted_tokens_total / st.spec_draft_tokens_total,
                 static_cast<unsigned long long>(st.steps_total));
  }
  if (!eo.kv_disk_dir.empty()) {
    e.wait_idle(std::chrono::seconds(5));  // the counters are published after the step
    EngineStats st = e.stats();
    std::fprintf(stderr,
                 "kv: cached %d of %zu prompt tokens | disk: %s%llu blocks, %llu promoted, %llu demoted, %llu checksum "
                 "failures, %llu I/O errors | read %.2f MiB in %.1f ms, wrote %.2f MiB in %.1f ms\n",
                 fin.cached_tokens, num_prompt, st.kv_disk_enabled ? "" : "off, ",
                 static_cast<unsigned long long>(st.kv_disk_blocks), static_cast<unsigned long long>(st.kv_disk_promotions),
                 static_cast<unsigned long long>(st.kv_disk_demotions),
                 static_cast<unsigned long long>(st.kv_disk_checksum_failures),
                 static_cast<unsigned long long>(st.kv_disk_io_errors), st.kv_disk_read_bytes / 1048576.0,
                 st.kv_disk_read_seconds * 1e3, st.kv_disk_write_bytes / 1048576.0, st.kv_disk_write_seconds * 1e3);
    if (st.kv_far_enabled) {
      std::fprintf(stderr,
                   "kv far tier (context beyond the RAM pool): %llu blocks moved to disk, %.2f MiB written, %.2f MiB read "
                   "back by attention, %llu checksum failures, %llu I/O errors%s\n",
                   static_cast<unsigned long long>(st.kv_far_spills), st.kv_far_write_bytes / 1048576.0,
                   st.kv_far_read_bytes / 1048576.0, static_cast<unsigned long long>(st.kv_far_checksum_failures),
                   static_cast<unsigned long long>(st.kv_far_io_errors), st.kv_far_degraded ? " (off after an error)" : "");
    }
  }
  return 0;
}

Subcommand kRun("run", "Complete one prompt, streaming the output to the terminal", [](CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  add_config_flag(app);
  o->engine.add_to(app, /*server=*/false);
  app.add_option("-p,--prompt", o->prompt, "Prompt text");
  app.add_option("-f,--file", o->prompt_file, "Read the prompt from a file (- = stdin)");
  app.add_option("-n,--n-predict", o->n_predict, "Tokens to generate (at most; -1 = until the end of the text or the context)");
  o->temperature_flag =
      app.add_option("--temp,--temperature", o->temperature, "Sampling temperature (0 = greedy; default: the model's, else 0.8)");
  o->top_k_flag = app.add_option("--top-k", o->top_k, "Top-k (0 = off; default: the model's, else 40)");
  o->top_p_flag = app.add_option("--top-p", o->top_p, "Top-p (1 = off; default: the model's, else 0.95)");
  o->min_p_flag = app.add_option("--min-p", o->min_p, "Min-p (0 = off; default: the model's, else 0.05)");
  o->repeat_penalty_flag =
      app.add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1 = off; default: the model's, else 1)");
  app.add_option("-s,--seed", o->seed, "Random seed (-1 = random)");
  app.add_option("--stop", o->stop, "Stop string (repeatable)");
  app.add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-sequence tokens");
  app.add_flag("--print-logprobs", o->print_logprobs,
               "Print each generated token's id and log-probability (and the top 5) as hex floats to stderr");
  return [o] { return run_prompt(*o); };
});

}  // namespace
}  // namespace hz::cli
