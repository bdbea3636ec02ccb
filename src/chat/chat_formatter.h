// Conversation -> prompt, the one place that knows how: the model's chat template or the built-in
// ChatML default, and the BOS rule. Used by the server and by `horizon chat` alike.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/text_range.h"
#include "chat/chat_template.h"

namespace hz {

// A rendered conversation, ready to tokenize.
struct ChatPrompt {
  std::string text;
  // Byte ranges of `text` that came from the request (message contents and roles, tools): to be
  // tokenized as plain text, so that a user who writes "<|im_end|>" cannot forge a turn; special
  // tokens are parsed only in the template's own text (Tokenizer::encode_mixed).
  std::vector<TextRange> input;
  // What to pass as the tokenizer's add_special: false when the template wrote BOS itself (it is
  // then parsed from the text), so that BOS is never doubled; true lets the vocabulary add it.
  bool add_special = true;
};

// Immutable after create(); format() is const and safe to call from several threads at once.
// Cheap to copy (the parsed template is shared).
class ChatFormatter {
 public:
  // `template_source`: the model's chat template; empty selects the built-in default (ChatML).
  // bos_token/eos_token: the vocabulary's texts, given to the template as variables. A template
  // that does not parse -> the parse error (line:col); callers choose whether to fall back to
  // chatml().
  static Result<ChatFormatter> create(std::string_view template_source, std::string bos_token, std::string eos_token,
                                      ChatTemplateOptions opts = {});
  // The built-in default, used when a model has no template:
  //   <|im_start|>{role}\n{content}<|im_end|>\n   (for each message; "developer" is written "system")
  //   <|im_start|>assistant\n                     (the generation prompt)
  static ChatFormatter chatml(std::string bos_token = "", std::string eos_token = "");

  // messages: a JSON array of {role, content, ...}; extra: further template variables (tools, ...)
  // besides bos_token and eos_token. A template that refuses the conversation (raise_exception, e.g.
  // a system message it does not support) or exceeds a limit -> an error naming the reason.
  Result<ChatPrompt> format(const nlohmann::ordered_json& messages, bool add_generation_prompt = true,
                            const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  bool is_default() const { return is_default_; }
  const ChatTemplate& chat_template() const { return template_; }

 private:
  ChatFormatter(ChatTemplate t, std::string bos, std::string eos, bool is_default)
      : template_(std::move(t)), bos_token_(std::move(bos)), eos_token_(std::move(eos)), is_default_(is_default) {}

  ChatTemplate template_;
  std::string bos_token_;
  std::string eos_token_;
  bool is_default_ = false;
};

}  // namespace hz
