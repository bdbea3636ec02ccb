// Anthropic's Messages API (POST /v1/messages) on top of the chat pipeline: the request is
// translated to an OpenAI chat body (so it gets the same validation, chat template, tools and
// grammar), and the reply is written in Anthropic's shapes: a message object, or its SSE event
// stream (message_start, content_block_start/delta/stop, message_delta, message_stop). No I/O here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chat/reasoning.h"
#include "chat/tool_call_parser.h"
#include "runtime/engine_api.h"
#include "server/api_error.h"
#include "server/reply_writer.h"
#include "server/tool_calling.h"

namespace hz {

// Translates a /v1/messages body; the 400 to answer when it is not acceptable (names the field).
std::optional<ApiError> anthropic_to_chat_body(std::string_view body, std::string* chat_body);

// Writes one reply, read back as `format` says (its reasoning becomes a thinking block before the
// answer, its calls tool_use blocks).
class AnthropicWriter : public ReplyWriter {
 public:
  AnthropicWriter(std::string id, std::string model, int32_t prompt_tokens, const ReplyFormat& format);

  std::string stream_start() override;
  std::string stream_tokens(const GenerationEvent& e) override;
  std::string stream_finish(const GenerationEvent& e) override;
  std::string body(const std::string& text, const GenerationEvent& finished) const override;

 private:
  std::string event(const char* name, const nlohmann::ordered_json& data) const;
  std::string open_block(bool thinking);
  std::string close_block();
  std::string thinking_delta(const std::string& text);  // "" for no text
  std::string text_delta(const std::string& text);      // "" for no text

  std::string id_;
  std::string model_;
  int32_t prompt_tokens_ = 0;
  ReplyFormat format_;
  ReplyStream stream_;
  int block_index_ = -1;  // the content block being streamed
  bool block_open_ = false;
  bool block_thinking_ = false;  // the open block is a thinking block (else text)
};

}  // namespace hz
