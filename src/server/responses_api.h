// OpenAI's Responses API (POST /v1/responses) on top of the chat pipeline, as /v1/messages is: the
// request is translated to a chat body (same validation, chat template, tools and grammar) and
// the reply is written as a Response object, or as its SSE event stream (response.created,
// response.output_item.added, response.output_text.delta, ..., response.completed). The server
// keeps no responses: `previous_response_id` and retrieval are refused, every request carries its
// whole conversation in `input`. No I/O here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/reasoning.h"
#include "chat/tool_call_parser.h"
#include "runtime/engine_api.h"
#include "server/api_error.h"
#include "server/reply_writer.h"
#include "server/tool_calling.h"

namespace hz {

// Translates a /v1/responses body into a chat body; `echo` receives the request fields a Response
// object repeats (instructions, max_output_tokens, tools, ...). The 400 to answer when the body is
// not acceptable names the field.
std::optional<ApiError> responses_to_chat_body(std::string_view body, std::string* chat_body, std::string* echo);

class ResponsesWriter : public ReplyWriter {
 public:
  // `id` is "resp_..."; the reply is read back as `format` says (its reasoning becomes a reasoning
  // item before the message, its calls function_call items).
  ResponsesWriter(std::string id, std::string model, int64_t created, const std::string& echo, const ReplyFormat& format);

  std::string stream_start() override;
  std::string stream_tokens(const GenerationEvent& e) override;
  std::string stream_finish(const GenerationEvent& e) override;
  std::string body(const std::string& text, const GenerationEvent& finished) const override;
  void set_reasoning_tokens(int32_t n) override { reasoning_tokens_ = n; }

 private:
  using ojson = nlohmann::ordered_json;
  ojson response(const char* status, const ojson& output, const GenerationEvent* finished) const;
  std::string event(const char* type, ojson data);
  std::string open_message();
  std::string close_message();
  std::string reasoning_delta(const std::string& text);  // opens the reasoning item; "" for no text
  std::string close_reasoning();
  ojson reasoning_item(const std::string& text) const;
  ojson output_items(const ParsedReply& reply) const;
  std::string message_id() const;

  std::string id_;
  std::string model_;
  int64_t created_ = 0;
  ojson echo_;
  ReplyFormat format_;
  ReplyStream stream_;
  bool reasoning_open_ = false;  // a reasoning item is being streamed
  std::string reasoning_text_;   // its text so far
  int32_t reasoning_tokens_ = 0;
  int64_t sequence_ = 0;       // sequence_number of the next event
  bool message_open_ = false;  // a message item is being streamed
  std::string streamed_;       // text of the open message so far
  ojson output_ = ojson::array();  // streamed items that are done
};

}  // namespace hz
