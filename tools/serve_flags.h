// The flags of `horizon serve`, shared with `horizon doctor` so that a serve command line can be
// checked as it is: engine flags, server flags, and what vLLM and llama-server command lines carry.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "base/status.h"
#include "server/server_options.h"
#include "tools/engine_flags.h"

namespace hz::cli {

struct ServeFlags {
  EngineFlags engine;
  ServerOptions server;
  double request_timeout_s = 600;
  double first_token_timeout_s = 0;
  std::vector<std::string> api_keys;      // --api-key, repeated or comma-separated
  std::string api_key_file;               // --api-key-file: one key per line
  double shutdown_grace_s = 10;
  double idle_timeout_s = 60;
  bool disable_log_requests = false;
  std::string allowed_origins;            // --allowed-origins as given (parsed into server)
  std::string chat_template;              // FILE, a built-in name, or inline Jinja; "" = the model's
  std::string generation_config = "auto";  // vLLM's flag: auto or vllm
  bool jinja = false;                     // llama-server's --jinja (always on here)
  bool metrics = false;                   // llama-server's --metrics (always on here)
  bool cont_batching = false;             // llama-server's --cont-batching / -cb (always on here)
  bool enforce_eager = false;
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;           // vLLM's --tool-call-parser (the template's format is used)
  std::string reasoning_format;           // llama-server's --reasoning-format: auto, none, deepseek
  bool trust_remote_code = false;         // vLLM's --trust-remote-code (no code is run from a model)
  std::string dtype;                      // vLLM's --dtype: only auto (the file's types) is taken
  std::string metrics_compat = "none";    // --metrics-compat: none or vllm

  ServeFlags();
  void add_to(CLI::App& app);
  // Fills `server` (timeouts, the host resolved to an address, the chat template's text) and
  // logs (when `warn`) one warning per flag accepted without effect. Errors name the flag.
  Status resolve_server(bool warn = true);
  // A short description of the chat template choice for the start-up summary ("" = the model's).
  std::string chat_template_origin;
};

// Resolves a host name or address to the numeric address to bind ("localhost" -> "127.0.0.1").
Result<std::string> resolve_host(const std::string& host);
// True for 127.0.0.0/8 and ::1.
bool is_loopback_address(const std::string& numeric);

}  // namespace hz::cli
