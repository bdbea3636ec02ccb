#include "tools/serve_flags.h"

#include <cmath>
#include <cstdlib>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "base/log.h"
#include "base/mapped_file.h"
#include "chat/reasoning.h"
#include "server/cors.h"
#include "tools/named_chat_templates.h"

namespace hz::cli {

ServeFlags::ServeFlags() {
  // Serving defaults: more sequences per batch than `run` needs.
  engine.opts.max_num_seqs = 16;
}

namespace {

// Seconds: a finite number, 0 or more (more than 0 when `positive`); CLI11's own range
// checks print the type's whole range ("not in range 0 to 1.79e308").
CLI::Validator seconds(bool positive) {
  return CLI::Validator(
      [positive](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(d)) return "'" + v + "' is not a number of seconds";
        if (positive ? !(d > 0) : !(d >= 0)) return "'" + v + (positive ? "' must be more than 0" : "' must be 0 or more");
        return "";
      },
      positive ? "SECONDS > 0" : "SECONDS >= 0");
}

}  // namespace

void ServeFlags::add_to(CLI::App& app) {
  EngineFlags& e = engine;
  ServerOptions& o = server;
  e.add_to(app, /*server=*/true);
  app.add_option("--host", o.host, "Address or host name to bind (localhost, 0.0.0.0, ::1)")->capture_default_str();
  app.add_option("--port", o.port, "Port to listen on (0 = any free port)")->capture_default_str()->check(
      CLI::Range(0, 65535));
  app.add_option("--api-key", api_keys,
                 "Require 'Authorization: Bearer KEY' on /v1/* (or env HORIZON_API_KEY); several keys: repeat the "
                 "flag or separate them with commas")
      ->delimiter(',');
  app.add_option("--api-key-file", api_key_file,
                 "Accept the API keys listed in FILE too, one per line (blank lines and lines starting with # are "
                 "skipped)");
  app.add_option("--rate-limit", o.rate_limit_rpm,
                 "Generation requests per minute per API key (per client address without keys), in bursts of up "
                 "to as many; over it: 429 with Retry-After (default 0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--metrics-auth", o.metrics_auth, "/metrics and /metrics.json need the API key too");
  app.add_option("--allowed-origins", allowed_origins,
                 "Browser origins that may call the API (CORS): comma-separated or a JSON list, * for any "
                 "(default: none, CORS off)");
  app.add_option("--metrics-compat", metrics_compat,
                 "vllm: /metrics also carries vLLM's metric names (vllm:num_requests_running, ...) for the same "
                 "figures, so dashboards made for vLLM work; none: horizon's names only")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "vllm"}));
  app.add_option("--http-threads", o.http_threads, "Threads for HTTP I/O")->capture_default_str()->check(
      CLI::Range(1, 64));
  app.add_option("--max-body-bytes", o.max_body_bytes, "Largest request body (larger -> 413)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return v.find_first_not_of("0123456789") == std::string::npos && v.size() <= 12 && std::stoull(v) >= 1024
                       ? ""
                       : "'" + v + "' must be a number of bytes, at least 1024";
          },
          "BYTES >= 1024"));
  app.add_option("--request-timeout", request_timeout_s, "Seconds a request may run (0 = no limit)")
      ->capture_default_str()
      ->check(seconds(false));
  app.add_option("--first-token-timeout", first_token_timeout_s,
                 "Seconds a request may wait for its first token (queue and prompt); past it: 504 (default 0: only "
                 "--request-timeout applies)")
      ->check(seconds(false));
  app.add_option("--idle-timeout", idle_timeout_s, "Seconds to read a request / keep an idle connection")
      ->capture_default_str()
      ->check(seconds(true));
  app.add_option("--shutdown-grace", shutdown_grace_s, "Seconds running requests get on SIGTERM/SIGINT")
      ->capture_default_str()
      ->check(seconds(false));
  app.add_flag("--normalize-newlines", o.normalize_newlines, "Turn CRLF into LF in prompts and messages");
  app.add_flag("--allow-special-in-content", o.allow_special_in_content,
               "Parse special tokens (e.g. <|im_end|>) written in chat messages; by default they are plain text");
  app.add_flag("--disable-log-requests", disable_log_requests, "No access-log line per request");
  app.add_flag("--embeddings,--embedding", o.embeddings, "Serve /v1/embeddings (the model's final hidden states, pooled)");
  app.add_option("--pooling", o.pooling, "Embedding pooling: mean (of all tokens) or last (token)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mean", "last"}));
  app.add_option("--chat-template", chat_template,
                 "Chat template for /v1/chat/completions: a Jinja FILE, inline Jinja, or a built-in name (" +
                     named_chat_template_list() + "); default: the model's, else chatml");
  app.add_option("--generation-config", generation_config,
                 "Sampling fields a request leaves out: auto (the model's defaults from generation_config.json / GGUF "
                 "general.sampling.*, else OpenAI's) or vllm (OpenAI's)")
      ->capture_default_str();
  app.add_flag("--jinja", jinja, "Accepted for llama-server command lines: the model's Jinja chat template is always used");
  app.add_flag("--metrics", metrics, "Accepted for llama-server command lines: /metrics is always served");
  app.add_flag("--cont-batching", cont_batching, "Accepted for llama-server command lines (-cb): batching is always continuous");
  app.add_flag("--enforce-eager", enforce_eager, "Accepted for vLLM command lines: no effect on the CPU");
  app.add_flag("--enable-auto-tool-choice", enable_auto_tool_choice,
               "Accepted for vLLM command lines: tool calling is always on (tool_choice auto, none, required or named)");
  app.add_option("--tool-call-parser", tool_call_parser,
                 "Accepted for vLLM command lines: tool calls are parsed in the format the chat template teaches "
                 "(hermes, mistral, llama3_json), else the server's own JSON form");
  app.add_option("--reasoning-parser", o.reasoning_parser,
                 "Chat replies' reasoning (<think>...</think>) comes back as reasoning_content: auto (when the chat "
                 "template writes reasoning tags), none (left in content), or a vLLM parser name (deepseek_r1, qwen3, "
                 "glm45, minimax_m2, mistral)")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (v == "auto" || v == "none" || reasoning_tags_by_name(v).has_value()) return "";
        return "'" + v + "' is not auto, none or a known reasoning parser (deepseek_r1, deepseek_v3, qwen3, "
               "glm45, minimax_m2, mistral)";
      });
  app.add_option("--reasoning-format", reasoning_format,
                 "llama-server's form of --reasoning-parser: auto, none, or deepseek (reasoning_content)")
      ->check(CLI::IsMember({"auto", "none", "deepseek", "deepseek-legacy"}));
  app.add_option("--reasoning-budget", o.reasoning_budget,
                 "The most tokens a chat reply may spend reasoning before its close tag (</think>) is forced, for "
                 "requests without thinking_token_budget: -1 no budget, 0 no reasoning")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 30));
  app.add_option("--reasoning-budget-message", o.reasoning_budget_message,
                 "Text written into the reasoning before a forced close tag, e.g. \"Time is up, so I answer now.\"");
  app.add_flag("--trust-remote-code", trust_remote_code,
               "Accepted for vLLM command lines: no code is ever run from a model folder");
  app.add_option("--dtype", dtype, "Accepted for vLLM command lines as auto (weights keep the file's types)");
}

Status ServeFlags::resolve_server(bool warn) {
  server.api_keys.clear();
  auto add_key = [&](std::string k, const std::string& from) -> Status {
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.back()))) k.pop_back();
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.front()))) k.erase(k.begin());
    if (k.empty()) return Status();
    for (unsigned char c : k) {
      if (c < 0x21 || c > 0x7e) return invalid_argument("{}: an API key must be printable ASCII without spaces", from);
    }
    if (std::find(server.api_keys.begin(), server.api_keys.end(), k) == server.api_keys.end())
      server.api_keys.push_back(std::move(k));
    return Status();
  };
  for (const std::string& k : api_keys) HZ_RETURN_IF_ERROR(add_key(k, "--api-key"));
  if (!api_key_file.empty()) {
    auto text = read_file(api_key_file);
    if (!text.ok()) return invalid_argument("--api-key-file: {}", text.status().message());
    std::istringstream lines(*text);
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      const size_t first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos || line[first] == '#') continue;
      HZ_RETURN_IF_ERROR(add_key(line, fmt::format("--api-key-file {} line {}", api_key_file, n)));
    }
    if (server.api_keys.empty()) return invalid_argument("--api-key-file {} lists no key", api_key_file);
  }
  if (api_keys.empty() && api_key_file.empty()) {
    if (const char* env = std::getenv("HORIZON_API_KEY"); env != nullptr) {
      std::istringstream parts(env);
      for (std::string k; std::getline(parts, k, ',');) HZ_RETURN_IF_ERROR(add_key(k, "HORIZON_API_KEY"));
    }
  }
  // Whole milliseconds; a positive time under one is one (0 means "no limit").
  auto ms = [](double s) {
    return std::chrono::milliseconds(s > 0 ? std::max<int64_t>(1, static_cast<int64_t>(s * 1000)) : 0);
  };
  server.request_timeout = ms(request_timeout_s);
  server.first_token_timeout = ms(first_token_timeout_s);
  server.shutdown_grace = ms(shutdown_grace_s);
  server.idle_timeout = ms(idle_timeout_s);
  server.access_log = !disable_log_requests;
  server.metrics_vllm_names = metrics_compat == "vllm";
  if (server.metrics_auth && server.api_keys.empty()) return invalid_argument("--metrics-auth needs --api-key (or HORIZON_API_KEY)");
  if (!engine.opts.served_model_name.empty()) server.served_model_name = engine.opts.served_model_name;
  if (!allowed_origins.empty()) {
    HZ_ASSIGN_OR_RETURN(server.allowed_origins, CorsPolicy::parse_flag(allowed_origins));
  }

  HZ_ASSIGN_OR_RETURN(std::string address, resolve_host(server.host));
  if (warn && !is_loopback_address(address) && server.api_keys.empty()) {
    HZ_LOG_WARN("--host {} is reachable from other machines and no --api-key is set: anyone who can reach it can use it",
                server.host);
  }
  server.host = address;

  if (!chat_template.empty()) {
    HZ_ASSIGN_OR_RETURN(ChatTemplateArg t, resolve_chat_template_arg(chat_template));
    server.chat_template = std::move(t.source);
    chat_template_origin = std::move(t.origin);
  }
  if (generation_config != "auto" && generation_config != "vllm")
    return invalid_argument("--generation-config '{}' is not one of auto, vllm", generation_config);
  if (jinja && warn) HZ_LOG_WARN("--jinja has no effect: the model's Jinja chat template is always used");
  if (metrics && warn) HZ_LOG_WARN("--metrics has no effect: /metrics is always served");
  if (cont_batching && warn) HZ_LOG_WARN("--cont-batching has no effect: batching is always continuous");
  if (enforce_eager && warn) HZ_LOG_WARN("--enforce-eager has no effect: nothing is captured on the CPU");
  if (enable_auto_tool_choice && warn) HZ_LOG_WARN("--enable-auto-tool-choice has no effect: tool calling is always on");
  if (!tool_call_parser.empty() && warn)
    HZ_LOG_WARN("--tool-call-parser {} has no effect: tool calls are parsed in the format the chat template teaches",
                tool_call_parser);
  if (!reasoning_format.empty()) {
    const std::string parser = reasoning_format == "deepseek-legacy" ? "deepseek" : reasoning_format;
    auto same_tags = [](const std::string& a, const std::string& b) {
      auto ta = reasoning_tags_by_name(a), tb = reasoning_tags_by_name(b);
      return ta && tb && ta->open == tb->open && ta->close == tb->close;
    };
    if (server.reasoning_parser != "auto" && server.reasoning_parser != parser && !same_tags(server.reasoning_parser, parser)) {
      return invalid_argument("--reasoning-format {} and --reasoning-parser {} disagree; give one", reasoning_format,
                              server.reasoning_parser);
    }
    if (server.reasoning_parser == "auto") server.reasoning_parser = parser;
  }
  if (trust_remote_code && warn) HZ_LOG_WARN("--trust-remote-code has no effect: no code is ever run from a model folder");
  if (!dtype.empty() && dtype != "auto") {
    return invalid_argument("--dtype {}: weights keep the file's types here (only auto is taken); convert with "
                            "`horizon quantize --type TYPE`",
                            dtype);
  }
  return Status();
}

Result<std::string> resolve_host(const std::string& host) {
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int gai = getaddrinfo(h.c_str(), nullptr, &hints, &res);
  if (gai != 0) return invalid_argument("--host '{}': cannot resolve: {}", host, gai_strerror(gai));
  // Prefer IPv4 (localhost resolves to both): clients' "localhost" tries 127.0.0.1 first.
  const addrinfo* pick = res;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  char buf[INET6_ADDRSTRLEN] = {};
  const void* src = pick->ai_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(pick->ai_addr)->sin_addr)
                                               : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(pick->ai_addr)->sin6_addr);
  const char* ok = inet_ntop(pick->ai_family, src, buf, sizeof(buf));
  freeaddrinfo(res);
  if (ok == nullptr) return invalid_argument("--host '{}': cannot format its address", host);
  return std::string(buf);
}

bool is_loopback_address(const std::string& numeric) {
  in_addr a4{};
  if (inet_pton(AF_INET, numeric.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, numeric.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

}  // namespace hz::cli
