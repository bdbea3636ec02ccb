// Chat messages -> one prompt string. Today: a documented ChatML default for every model.
// TODO(#5): switch render_chat_prompt() to hz::ChatTemplate (src/tokenizer/chat_template.h) with
// ModelInfo::chat_template once that lands; it is the single place to change.
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

// THE switch point for chat templates: renders `messages` for `model` with a generation prompt.
Result<std::string> render_chat_prompt(const ModelInfo& model, const std::vector<ChatMessage>& messages);

}  // namespace hz
