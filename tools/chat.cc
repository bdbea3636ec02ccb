// `horizon chat -m MODEL`: an interactive terminal chat. Each turn renders the whole history with
// the model's chat template (GGUF tokenizer.chat_template or tokenizer_config.json's; ChatML when
// the model has none), streams the reply, and keeps it in the history. /reset clears the history,
// /exit (or end of input) quits, Ctrl-C stops the reply being generated without exiting.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "runtime/local_engine.h"
#include "chat/chat_template.h"
#include "tools/cli.h"
#include "tools/engine_flags.h"

namespace hz::cli {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) { g_interrupted.store(true); }

struct ChatOptions {
  EngineFlags engine;
  std::string system;
  int32_t n_predict = 512;
  float temperature = -1;  // < 0: the model's default (generation_config.json), else 0.8
  int32_t top_k = -1;
  float top_p = -1;
  float min_p = 0.05f;
  int64_t seed = -1;
  bool ignore_eos = false;
};

// Streams text to stdout; the main thread waits for the end, waking up to notice Ctrl-C.
class ChatSink : public GenerationSink {
 public:
  void on_event(GenerationEvent ev) override {
    if (ev.kind == GenerationEvent::Kind::kTokens) {
      if (!ev.text.empty()) {
        std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
        std::fflush(stdout);
        std::lock_guard<std::mutex> lk(mu_);
        text_ += ev.text;
      }
      return;
    }
    std::lock_guard<std::mutex> lk(mu_);
    final_ = std::move(ev);
    done_ = true;
    cv_.notify_all();
  }
  // True when finished; false after `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return done_; });
  }
  GenerationEvent final_event() {
    std::lock_guard<std::mutex> lk(mu_);
    return final_;
  }
  std::string text() {
    std::lock_guard<std::mutex> lk(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string text_;
  GenerationEvent final_;
};

float meta_float(const Model& m, const char* key, float def) {
  auto v = m.file().get_float_or(key, def);
  return v.ok() ? static_cast<float>(*v) : def;
}

int run_chat(const ChatOptions& o) {
  if (o.n_predict < 1) return fail("-n must be at least 1");
  auto opts = o.engine.resolve();
  if (!opts.ok()) return fail(opts.status().message());
  EngineOptions eo = *opts;
  eo.max_num_seqs = 1;
  eo.max_queue = 1;

  // SIGINT goes to this thread only: the engine's threads inherit a mask that blocks it.
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigint, nullptr);
  auto engine = LocalEngine::create(eo);
  pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr);
  if (!engine.ok()) return fail(engine.status().message());
  LocalEngine& e = **engine;
  const ModelInfo& info = e.model_info();

  std::string source = info.chat_template.empty() ? ChatTemplate::default_template_source() : info.chat_template;
  auto tmpl = ChatTemplate::parse(source);
  if (!tmpl.ok()) {
    fmt::print(stderr, "warning: the model's chat template does not parse ({}); using ChatML\n", tmpl.status().message());
    tmpl = ChatTemplate::parse(ChatTemplate::default_template_source());
    if (!tmpl.ok()) return fail(tmpl.status().message());
  }

  SamplingParams sp;
  sp.temperature = o.temperature >= 0 ? o.temperature : meta_float(e.model(), "general.sampling.temp", 0.8f);
  sp.top_p = o.top_p >= 0 ? o.top_p : meta_float(e.model(), "general.sampling.top_p", 0.95f);
  auto model_top_k = e.model().file().get_int_or("general.sampling.top_k", 40);
  sp.top_k = o.top_k >= 0 ? o.top_k : static_cast<int32_t>(model_top_k.ok() ? *model_top_k : 40);
  sp.min_p = o.min_p;
  sp.ignore_eos = o.ignore_eos;
  if (!(sp.temperature >= 0)) return fail("--temp must be >= 0");
  if (!(sp.top_p > 0 && sp.top_p <= 1)) return fail("--top-p must be in (0, 1]");

  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a Ctrl-C at the prompt interrupts the read
  sigaction(SIGINT, &sa, nullptr);

  const bool tty = isatty(STDIN_FILENO);
  if (tty) fmt::print(stderr, "horizon chat: {} ({}). /reset clears the history, /exit quits, Ctrl-C stops a reply.\n", info.name,
                      info.chat_template.empty() ? "ChatML template" : "the model's chat template");
  nlohmann::ordered_json history = nlohmann::ordered_json::array();
  auto reset = [&] {
    history = nlohmann::ordered_json::array();
    if (!o.system.empty()) history.push_back({{"role", "system"}, {"content", o.system}});
  };
  reset();
  uint64_t turn = 0;
  for (;;) {
    if (tty) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    g_interrupted.store(false);
    std::string line;
    if (!std::getline(std::cin, line)) {
      if (g_interrupted.load() && !std::cin.bad()) {  // Ctrl-C at the prompt: not an exit
        std::cin.clear();
        clearerr(stdin);
        std::fputs("\n(use /exit to quit)\n", stderr);
        continue;
      }
      break;  // end of input
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      reset();
      std::fputs("(history cleared)\n", stderr);
      continue;
    }
    if (line.empty()) continue;

    history.push_back({{"role", "user"}, {"content", line}});
    nlohmann::ordered_json extra = {{"bos_token", info.bos_token}, {"eos_token", info.eos_token}};
    auto prompt = tmpl->render(history, /*add_generation_prompt=*/true, extra);
    if (!prompt.ok()) {
      history.erase(history.size() - 1);
      fmt::print(stderr, "error: chat template: {}\n", prompt.status().message());
      continue;
    }
    // The template writes BOS itself when it wants one; otherwise the tokenizer adds it.
    const bool has_bos = !info.bos_token.empty() && prompt->rfind(info.bos_token, 0) == 0;
    GenerationRequest req;
    req.prompt = e.tokenize(*prompt, /*add_special=*/!has_bos, /*parse_special=*/true);
    req.sampling = sp;
    const int32_t room = info.max_model_len - static_cast<int32_t>(req.prompt.size());
    if (room < 1) {
      history.erase(history.size() - 1);
      fmt::print(stderr, "error: the conversation ({} tokens) fills the context of {} tokens; /reset to start over\n",
                 req.prompt.size(), info.max_model_len);
      continue;
    }
    req.sampling.max_tokens = std::min(o.n_predict, room);
    if (o.seed >= 0) req.sampling.seed = static_cast<uint64_t>(o.seed) + turn;
    ++turn;
    auto sink = std::make_shared<ChatSink>();
    req.sink = sink;
    const size_t num_prompt = req.prompt.size();
    auto id = e.submit(std::move(req));
    if (!id.ok()) {
      history.erase(history.size() - 1);
      fmt::print(stderr, "error: {}\n", id.status().message());
      continue;
    }
    bool cancelled = false;
    while (!sink->wait_for(std::chrono::milliseconds(50))) {
      if (g_interrupted.exchange(false) && !cancelled) {
        e.cancel(*id);
        cancelled = true;
      }
    }
    GenerationEvent fin = sink->final_event();
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (fin.finish_reason == FinishReason::kError) {
      history.erase(history.size() - 1);
      fmt::print(stderr, "error: {}\n", fin.error.message());
      continue;
    }
    // A stopped reply stays in the history as far as it got.
    history.push_back({{"role", "assistant"}, {"content", sink->text()}});
    fmt::print(stderr, "[{} prompt tokens, {} generated, stop: {}]\n", num_prompt, fin.completion_tokens,
               fin.finish_reason == FinishReason::kCancelled ? "stopped by Ctrl-C" : finish_reason_name(fin.finish_reason));
  }
  return 0;
}

Subcommand kChat("chat", "Chat with a model in the terminal (its chat template, streaming, history)", [](CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  o->engine.add_to(app, /*server=*/false);
  app.add_option("--system", o->system, "System message at the start of the conversation");
  app.add_option("-n,--n-predict", o->n_predict, "Tokens per reply (at most)");
  app.add_option("--temp,--temperature", o->temperature, "Sampling temperature (0 = greedy; default: the model's, else 0.8)");
  app.add_option("--top-k", o->top_k, "Top-k (0 = off; default: the model's, else 40)");
  app.add_option("--top-p", o->top_p, "Top-p (1 = off; default: the model's, else 0.95)");
  app.add_option("--min-p", o->min_p, "Min-p (0 = off)");
  app.add_option("-s,--seed", o->seed, "Random seed (-1 = random)");
  app.add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-sequence tokens");
  return [o] { return run_chat(*o); };
});

}  // namespace
}  // namespace hz::cli
