// A reply written in another API's shapes than OpenAI's chat completions (Anthropic's Messages,
// OpenAI's Responses): the chat pipeline generates, a writer renders. No I/O here.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/engine_api.h"

namespace hz {

class ReplyWriter {
 public:
  virtual ~ReplyWriter() = default;
  // Streaming: the events to send first, for each kTokens event ("" when nothing), and at the end
  // (including the error event of a failed generation).
  virtual std::string stream_start() = 0;
  virtual std::string stream_tokens(const GenerationEvent& e) = 0;
  virtual std::string stream_finish(const GenerationEvent& e) = 0;
  // Non-streamed: the whole body for the generated `text`.
  virtual std::string body(const std::string& text, const GenerationEvent& finished) const = 0;
  // How many of the reply's tokens were reasoning, for shapes that report it (before the end).
  virtual void set_reasoning_tokens(int32_t /*n*/) {}
};

}  // namespace hz
