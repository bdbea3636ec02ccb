#include "chat/chat_formatter.h"

#include "base/check.h"

namespace hz {
namespace {

// The built-in default (ChatML, as used by Qwen, Yi and many fine-tunes). Non-string content
// (e.g. a list of parts the caller did not flatten) is written as JSON rather than failing, so
// that the default never refuses a valid request.
constexpr const char* kChatMlSource =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' ~ ('system' if message['role'] == 'developer' else message['role']) ~ '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- elif message['content'] is defined and message['content'] is not none -%}"
    "{{- message['content'] | tojson -}}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

}  // namespace

Result<ChatFormatter> ChatFormatter::create(std::string_view template_source, std::string bos_token,
                                            std::string eos_token, ChatTemplateOptions opts) {
  const bool is_default = template_source.empty();
  auto t = ChatTemplate::parse(std::string(is_default ? kChatMlSource : template_source), opts);
  if (!t.ok()) return t.status().with_context("chat template does not parse");
  return ChatFormatter(std::move(t).value(), std::move(bos_token), std::move(eos_token), is_default);
}

ChatFormatter ChatFormatter::chatml(std::string bos_token, std::string eos_token) {
  auto f = create("", std::move(bos_token), std::move(eos_token));
  HZ_CHECK(f.ok());  // the built-in source always parses
  return std::move(f).value();
}

Result<ChatPrompt> ChatFormatter::format(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra) const {
  if (!extra.is_object()) return invalid_argument("chat template: extra variables must be a JSON object");
  // BOS and EOS are the vocabulary's own texts: the template writes them as its own.
  nlohmann::ordered_json trusted = {{"bos_token", bos_token_}, {"eos_token", eos_token_}};
  HZ_ASSIGN_OR_RETURN(RenderedText r, template_.render_tagged(messages, add_generation_prompt, extra, trusted));
  ChatPrompt p;
  p.text = std::move(r.text);
  p.input = std::move(r.input);
  // The BOS rule: a template that writes BOS itself (Llama 3, Mistral, Gemma) gets exactly that
  // one; otherwise the tokenizer adds it when the vocabulary asks for one.
  const bool template_wrote_bos = !bos_token_.empty() && p.text.compare(0, bos_token_.size(), bos_token_) == 0 &&
                                  (p.input.empty() || p.input.front().begin >= bos_token_.size());
  p.add_special = !template_wrote_bos;
  return p;
}

}  // namespace hz
