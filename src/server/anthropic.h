// Anthropic's Messages API (POST /v1/messages) on top of the chat pipeline: the request is
// translated to an OpenAI chat body (so it gets the same validation, chat template, tools and
// grammar), and the reply is written in Anthropic's shapes: a message object, or its SSE event
// stream (message_start, content_block_start/delta/stop, message_delta, message_stop). No I/O here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chat/tool_call_parser.h"
#include "runtime/engine_api.h"
#include "server/api_error.h"
#include "server/tool_calling.h"

namespace hz {

// Translates a /v1/messages body; the 400 to answer when it is not acceptable (names the field).
std::optional<ApiError> anthropic_to_chat_body(std::string_view body, std::string* chat_body);

// Writes one reply. `format`: the tool-call format of the request (kNone: no tools).
class AnthropicWriter {
 public:
  AnthropicWriter(std::string id, std::string model, int32_t prompt_tokens, ToolCallFormat format);

  std::string stream_start();
  std::string stream_tokens(const GenerationEvent& e);
  std::string stream_finish(const GenerationEvent& e);
  std::string body(const std::string& text, const GenerationEvent& finished) const;

 private:
  std::string event(const char* name, const nlohmann::ordered_json& data) const;
  std::string open_text_block();
  std::string close_block();

  std::string id_;
  std::string model_;
  int32_t prompt_tokens_ = 0;
  ToolCallFormat format_;
  std::optional<ToolStreamGate> gate_;
  int block_index_ = -1;  // the content block being streamed
  bool block_open_ = false;
};

}  // namespace hz
