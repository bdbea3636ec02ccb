#include "server/chat_prompt.h"

namespace hz {

std::string render_default_chat_prompt(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>";
    out += m.role == "developer" ? "system" : m.role;
    out += '\n';
    out += m.content;
    out += "<|im_end|>\n";
  }
  out += "<|im_start|>assistant\n";
  return out;
}

Result<std::string> render_chat_prompt(const ModelInfo& model, const std::vector<ChatMessage>& messages) {
  // TODO(#5): when model.chat_template is not empty, render it with hz::ChatTemplate (bos_token and
  // eos_token from `model`, add_generation_prompt = true) and return its error as kInvalidArgument.
  (void)model;
  return render_default_chat_prompt(messages);
}

}  // namespace hz
