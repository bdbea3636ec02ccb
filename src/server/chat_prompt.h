// Chat messages -> one prompt string: the model's own chat template (hz::ChatTemplate, a sandboxed
// Jinja subset) when it has one, else the documented ChatML default below.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/engine_api.h"
#include "server/openai_request.h"

namespace hz {

// The default template (ChatML, as used by Qwen, Yi, many fine-tunes), for messages m_1..m_n:
//   <|im_start|>{role}\n{content}<|im_end|>\n   (for each message)
//   <|im_start|>assistant\n                     (the generation prompt)
// No BOS is written here: the server tokenizes with add_special=true, which adds it when the
// model wants one. "developer" is rendered as "system" (OpenAI's newer name for it).
std::string render_default_chat_prompt(const std::vector<ChatMessage>& messages);

// Renders `messages` for `model` with a generation prompt. A template that refuses the
// conversation (raise_exception, e.g. a system message it does not support) -> kInvalidArgument.
Result<std::string> render_chat_prompt(const ModelInfo& model, const std::vector<ChatMessage>& messages);

}  // namespace hz
