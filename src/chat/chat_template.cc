// Chat templates on top of the sandboxed Jinja interpreter (see chat_template.h).
#include "chat/chat_template.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_parser.h"

namespace hz {

struct ChatTemplate::Impl {
  std::string source;
  ChatTemplateOptions opts;
  jinja::Body body;
};

Result<ChatTemplate> ChatTemplate::parse(std::string source, ChatTemplateOptions opts) {
  if (opts.max_depth < 1) return invalid_argument("ChatTemplateOptions.max_depth must be >= 1");
  auto impl = std::make_shared<Impl>();
  impl->source = std::move(source);
  impl->opts = opts;
  HZ_ASSIGN_OR_RETURN(impl->body, jinja::parse_template(impl->source, opts.max_depth));
  return ChatTemplate(std::move(impl));
}

template <typename Json>
Result<std::string> ChatTemplate::render_impl(const Json& messages, bool add_generation_prompt,
                                              const Json& extra) const {
  const ChatTemplateOptions& o = impl_->opts;
  if (!messages.is_array()) return invalid_argument("chat template: messages must be a JSON array");
  if (!extra.is_null() && !extra.is_object()) return invalid_argument("chat template: extra variables must be a JSON object");
  jinja::Scope globals(nullptr);
  jinja::install_globals(globals);
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      auto v = jinja::from_json(it.value(), o.max_depth);
      if (!v.ok()) return v.status().with_context("chat template variable '" + it.key() + "'");
      globals.set(it.key(), std::move(v).value());
    }
  }
  auto msgs = jinja::from_json(messages, o.max_depth);
  if (!msgs.ok()) return msgs.status().with_context("chat template messages");
  globals.set("messages", std::move(msgs).value());
  globals.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  jinja::Limits limits{o.max_output_bytes, o.max_steps, o.max_depth, o.max_alloc_bytes};
  jinja::Interpreter interp(limits, impl_->source);
  return interp.render(impl_->body, globals);
}

Result<std::string> ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                         const nlohmann::json& extra) const {
  return render_impl(messages, add_generation_prompt, extra);
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra) const {
  return render_impl(messages, add_generation_prompt, extra);
}

const std::string& ChatTemplate::source() const { return impl_->source; }

const char* ChatTemplate::default_template_source() {
  // Non-string content (e.g. a list of parts the caller did not flatten) is rendered as JSON
  // rather than failing, so that the default never errors on valid requests.
  return "{%- for message in messages -%}"
         "{{- '<|im_start|>' ~ message['role'] ~ '\\n' -}}"
         "{%- if message['content'] is string -%}{{- message['content'] -}}"
         "{%- elif message['content'] is defined and message['content'] is not none -%}"
         "{{- message['content'] | tojson -}}{%- endif -%}"
         "{{- '<|im_end|>\\n' -}}"
         "{%- endfor -%}"
         "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";
}

}  // namespace hz
