// Chat messages -> one prompt for the model: the request's messages through the model's
// ChatFormatter (its chat template, else the built-in ChatML default; see chat/chat_formatter.h).
#pragma once

#include <vector>

#include "base/status.h"
#include "chat/chat_formatter.h"
#include "runtime/engine_api.h"
#include "server/openai_request.h"
#include "server/tool_calling.h"

namespace hz {

// Renders `messages` for `model` with a generation prompt. `tools`/`setup`: the request's tools
// (passed to a template that knows them; for one that does not, the generic form's system text
// joins the conversation: see tool_calling.h). A template that refuses the conversation
// (raise_exception, e.g. a system message it does not support) -> kInvalidArgument; a model
// template that does not parse -> kInternal. `template_kwargs`: more variables for the template
// (the request's chat_template_kwargs).
Result<ChatPrompt> render_chat_prompt(const ModelInfo& model, const std::vector<ChatMessage>& messages,
                                      const ToolRequest& tools = {}, const ToolSetup& setup = {},
                                      const nlohmann::ordered_json& template_kwargs = nlohmann::ordered_json::object());

}  // namespace hz
