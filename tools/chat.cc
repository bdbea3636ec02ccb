// `horizon chat -m MODEL`: an interactive terminal chat. Each turn renders the whole history with
// the model's chat template (GGUF tokenizer.chat_template or tokenizer_config.json's; ChatML when
// the model has none), streams the reply, and keeps it in the history. On a terminal lines are
// edited and recalled with libedit. Slash commands are answered here (/help, /clear, /exit); end
// of input (Ctrl-D) quits; Ctrl-C stops the reply being generated without exiting; when the
// conversation fills the context the oldest turns are dropped. A model that reasons (<think>)
// has its reasoning shown on stderr and kept apart from the answer in the history.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include <editline/readline.h>

#include "runtime/local_engine.h"
#include "chat/chat_formatter.h"
#include "chat/reasoning.h"
#include "server/grammar_constraint.h"
#include "tools/cli.h"
#include "tools/config_file.h"
#include "tools/engine_flags.h"
#include "tools/model_sampling.h"
#include "tools/named_chat_templates.h"
#include "tools/progress.h"

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
  float min_p = -1;  // < 0: the model's default, else 0.05
  int64_t seed = -1;
  bool ignore_eos = false;
  std::string chat_template;            // --chat-template: empty = the model's
  std::string reasoning_format = "auto";  // auto: reasoning shown apart; none: left in the reply
  int32_t reasoning_budget = -1;
};

// Streams text to stdout; the main thread waits for the end, waking up to notice Ctrl-C. With a
// model that reasons, the reasoning goes to stderr (dim on a terminal) and only the answer to
// stdout, so a script reading stdout gets the answer alone.
class ChatSink : public GenerationSink {
 public:
  ChatSink(std::optional<ReasoningStream> reasoning, bool dim) : reasoning_(std::move(reasoning)), dim_(dim) {}

  void on_event(GenerationEvent ev) override {
    if (ev.kind == GenerationEvent::Kind::kTokens) {
      if (!ev.text.empty()) {
        std::lock_guard<std::mutex> lk(mu_);
        text_ += ev.text;
        if (reasoning_) {
          show(reasoning_->feed(ev.text));
        } else {
          write_answer(ev.text);
        }
      }
      return;
    }
    std::lock_guard<std::mutex> lk(mu_);
    if (reasoning_) show(reasoning_->finish());
    end_reasoning();
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
  // The reply apart: its reasoning and its answer (all answer when the model does not reason).
  std::string reasoning() {
    std::lock_guard<std::mutex> lk(mu_);
    return reasoning_text_;
  }
  std::string answer() {
    std::lock_guard<std::mutex> lk(mu_);
    return reasoning_ ? answer_text_ : text_;
  }

 private:
  void show(const ReasoningStream::Delta& d) {
    if (!d.reasoning.empty()) {
      if (!in_reasoning_) std::fputs(dim_ ? "\x1b[2m" : "", stderr);
      in_reasoning_ = true;
      std::fwrite(d.reasoning.data(), 1, d.reasoning.size(), stderr);
      reasoning_text_ += d.reasoning;
    }
    if (!d.content.empty()) {
      end_reasoning();
      answer_text_ += d.content;
      write_answer(d.content);
    }
  }
  void end_reasoning() {
    if (!in_reasoning_) return;
    in_reasoning_ = false;
    std::fputs(dim_ ? "\x1b[0m\n" : "\n", stderr);
  }
  static void write_answer(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string text_;
  std::optional<ReasoningStream> reasoning_;
  bool dim_ = false;
  bool in_reasoning_ = false;  // reasoning is being written to stderr
  std::string reasoning_text_, answer_text_;
  GenerationEvent final_;
};

// One line of input: with line editing and history (libedit) on a terminal, plain reads from a
// pipe. nullopt at end of input or when Ctrl-C interrupted the read (g_interrupted tells which).
std::optional<std::string> read_line(bool tty) {
  if (tty) {
    char* raw = readline("> ");
    if (raw == nullptr) return std::nullopt;
    std::string line(raw);
    std::free(raw);
    if (!line.empty()) add_history(line.c_str());
    return line;
  }
  std::string line;
  if (!std::getline(std::cin, line)) {
    if (g_interrupted.load() && !std::cin.bad()) {
      std::cin.clear();
      clearerr(stdin);
    }
    return std::nullopt;
  }
  return line;
}

enum class SlashCommand { kHelp, kClear, kExit, kUnknown };

SlashCommand parse_slash_command(const std::string& line) {
  std::string cmd = line.substr(0, line.find(' '));
  if (cmd == "/help" || cmd == "/?") return SlashCommand::kHelp;
  if (cmd == "/clear" || cmd == "/reset") return SlashCommand::kClear;
  if (cmd == "/exit" || cmd == "/quit" || cmd == "/bye") return SlashCommand::kExit;
  return SlashCommand::kUnknown;
}

constexpr const char* kChatHelp =
    "commands (answered here, not sent to the model):\n"
    "  /help          this list\n"
    "  /clear         forget the conversation (also /reset)\n"
    "  /exit          quit (also /quit, or Ctrl-D)\n"
    "  //text         send a message that starts with /\n"
    "keys: arrows and Ctrl-R recall earlier lines; Ctrl-C stops a reply.\n"
    "When the conversation fills the context, the oldest turns are dropped (a note says so).\n";

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
  auto engine = [&] {
    LibraryProgress progress(o.engine.quiet);
    return LocalEngine::create(eo);
  }();
  pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr);
  if (!engine.ok()) return fail(engine.status().message());
  LocalEngine& e = **engine;
  const ModelInfo& info = e.model_info();

  std::string template_source = info.chat_template;
  if (!o.chat_template.empty()) {
    auto t = resolve_chat_template_arg(o.chat_template);
    if (!t.ok()) return fail(t.status().message());
    template_source = t->source;
  }
  auto formatter = ChatFormatter::create(template_source, info.bos_token, info.eos_token);
  if (!formatter.ok()) {
    fmt::print(stderr, "warning: the model's {}; using ChatML\n", formatter.status().message());
    formatter = ChatFormatter::chatml(info.bos_token, info.eos_token);
  }
  // A model that reasons: its reasoning is shown apart and kept apart in the history.
  const std::optional<ReasoningTags> reasoning =
      o.reasoning_format == "none" ? std::nullopt : detect_reasoning_tags(template_source);
  const Tokenizer& tokenizer = *e.get_tokenizer();
  auto piece = [&tokenizer](int32_t id) { return tokenizer.token_to_piece(id, /*special=*/true); };
  auto continuation = [&tokenizer](const std::string& text) {
    return tokenizer.encode_continuation(text, /*parse_special=*/true);
  };

  SamplingParams sp;
  const ModelSampling model = model_sampling(e.model().file());
  sp.temperature = o.temperature >= 0 ? o.temperature : model.temperature.value_or(0.8f);
  sp.top_p = o.top_p >= 0 ? o.top_p : model.top_p.value_or(0.95f);
  sp.top_k = o.top_k >= 0 ? o.top_k : model.top_k.value_or(40);
  sp.min_p = o.min_p >= 0 ? o.min_p : model.min_p.value_or(0.05f);
  sp.ignore_eos = o.ignore_eos;
  if (!(sp.temperature >= 0)) return fail("--temp must be >= 0");
  if (!(sp.top_p > 0 && sp.top_p <= 1)) return fail("--top-p must be in (0, 1]");

  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a Ctrl-C at the prompt interrupts the read
  sigaction(SIGINT, &sa, nullptr);

  const bool tty = isatty(STDIN_FILENO);
  if (tty) fmt::print(stderr, "horizon chat: {} ({}). /help lists the commands, Ctrl-C stops a reply, Ctrl-D quits.\n", info.name,
                      info.chat_template.empty() ? "ChatML template" : "the model's chat template");
  nlohmann::ordered_json history = nlohmann::ordered_json::array();
  auto reset = [&] {
    history = nlohmann::ordered_json::array();
    if (!o.system.empty()) history.push_back({{"role", "system"}, {"content", o.system}});
  };
  reset();
  const size_t first_turn = o.system.empty() ? 0 : 1;  // index of the oldest message that may be dropped
  uint64_t turn = 0;
  for (;;) {
    g_interrupted.store(false);
    auto line = read_line(tty);
    if (!line) {
      if (g_interrupted.load()) {  // Ctrl-C at the prompt: not an exit
        std::fputs("\n(Ctrl-D or /exit quits)\n", stderr);
        continue;
      }
      if (tty) std::fputc('\n', stdout);  // Ctrl-D: leave the terminal on a fresh line
      break;  // end of input
    }
    if (!line->empty() && line->back() == '\r') line->pop_back();
    if (line->empty()) continue;
    if ((*line)[0] == '/' && line->rfind("//", 0) != 0) {
      const SlashCommand cmd = parse_slash_command(*line);
      if (cmd == SlashCommand::kExit) break;
      if (cmd == SlashCommand::kClear) {
        reset();
        std::fputs("(history cleared)\n", stderr);
      } else if (cmd == SlashCommand::kHelp) {
        std::fputs(kChatHelp, stderr);
      } else {
        fmt::print(stderr, "unknown command {}; /help lists the commands (start a message with // to send a /)\n", *line);
      }
      continue;
    }
    if (line->rfind("//", 0) == 0) line->erase(0, 1);

    history.push_back({{"role", "user"}, {"content", *line}});
    GenerationRequest req;
    req.sampling = sp;
    bool rendered = false;
    std::string prompt_text;
    int32_t room = 0;
    size_t dropped = 0;
    for (;;) {
      auto prompt = formatter->format(history);
      if (!prompt.ok()) {
        fmt::print(stderr, "error: chat template: {}\n", prompt.status().message());
        break;
      }
      req.prompt = e.tokenize_mixed(prompt->text, prompt->input, prompt->add_special);
      prompt_text = prompt->text;
      room = info.max_model_len - static_cast<int32_t>(req.prompt.size());
      // Room for a whole reply (or a quarter of the context, if -n is larger): else the context is
      // full, and the oldest turn (a user message and the reply to it) makes way.
      const int32_t want = std::min(o.n_predict, std::max(1, info.max_model_len / 4));
      if (room >= want || history.size() <= first_turn + 1) {
        rendered = true;
        break;
      }
      size_t n = 1;
      while (first_turn + n < history.size() - 1 && history[first_turn + n]["role"] != "user") ++n;
      history.erase(history.begin() + first_turn, history.begin() + first_turn + n);
      ++dropped;
    }
    if (dropped > 0)
      fmt::print(stderr, "(context full: dropped the oldest {} turn{} to make room)\n", dropped, dropped == 1 ? "" : "s");
    if (!rendered) {
      history.erase(history.size() - 1);
      continue;
    }
    if (room < 1) {
      history.erase(history.size() - 1);
      fmt::print(stderr, "error: the message ({} tokens) fills the context of {} tokens by itself; send a shorter one\n",
                 req.prompt.size(), info.max_model_len);
      continue;
    }
    req.sampling.max_tokens = std::min(o.n_predict, room);
    if (o.seed >= 0) req.sampling.seed = static_cast<uint64_t>(o.seed) + turn;
    ++turn;
    std::optional<ReasoningStream> split;
    if (reasoning) {
      const std::string& text = prompt_text;
      const bool inside = prompt_opens_reasoning(text, *reasoning);
      split.emplace(*reasoning, inside);
      if (o.reasoning_budget >= 0 && (inside || !prompt_closes_reasoning(text, *reasoning))) {
        req.sampling.logit_mask = std::make_shared<ReasoningMask>(
            nullptr, *reasoning, piece, inside, -1,
            make_reasoning_budget(o.reasoning_budget, "", reasoning->close, continuation));
      }
    }
    auto sink = std::make_shared<ChatSink>(std::move(split), isatty(STDERR_FILENO) != 0);
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
    nlohmann::ordered_json reply = {{"role", "assistant"}, {"content", sink->answer()}};
    if (reasoning) reply["reasoning_content"] = sink->reasoning();
    history.push_back(std::move(reply));
    fmt::print(stderr, "[{} prompt tokens, {} generated, stop: {}]\n", num_prompt, fin.completion_tokens,
               fin.finish_reason == FinishReason::kCancelled ? "stopped by Ctrl-C" : finish_reason_name(fin.finish_reason));
  }
  return 0;
}

Subcommand kChat("chat", "Chat with a model in the terminal (its chat template, streaming, history)", [](CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  add_config_flag(app);
  o->engine.add_to(app, /*server=*/false);
  app.add_option("--system", o->system, "System message at the start of the conversation");
  app.add_option("-n,--n-predict", o->n_predict, "Tokens per reply (at most)");
  app.add_option("--temp,--temperature", o->temperature, "Sampling temperature (0 = greedy; default: the model's, else 0.8)");
  app.add_option("--top-k", o->top_k, "Top-k (0 = off; default: the model's, else 40)");
  app.add_option("--top-p", o->top_p, "Top-p (1 = off; default: the model's, else 0.95)");
  app.add_option("--min-p", o->min_p, "Min-p (0 = off; default: the model's, else 0.05)");
  app.add_option("-s,--seed", o->seed, "Random seed (-1 = random)");
  app.add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-sequence tokens");
  app.add_option("--chat-template", o->chat_template,
                 "Chat template: a file, inline Jinja, or a built-in name (" + named_chat_template_list() +
                     "); default: the model's, else chatml");
  app.add_option("--reasoning-format", o->reasoning_format,
                 "A reasoning model's thinking (<think>...</think>): auto (shown apart, on stderr) or none (left in the "
                 "reply)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "none"}));
  app.add_option("--reasoning-budget", o->reasoning_budget,
                 "The most tokens a reply may spend reasoning before its close tag is forced (-1: no budget, 0: none)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 30));
  return [o] { return run_chat(*o); };
});

}  // namespace
}  // namespace hz::cli
