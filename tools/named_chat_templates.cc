#include "tools/named_chat_templates.h"

#include <array>
#include <filesystem>
#include <utility>

#include "base/mapped_file.h"
#include "chat/chat_template.h"

namespace hz::cli {
namespace {

// Each renders messages[] and, with add_generation_prompt, the opening of the assistant's turn.
// Formats as their model families document them; BOS comes from bos_token where the format
// starts with it (the server drops a leading BOS so the tokenizer adds exactly one).
constexpr std::array<std::pair<std::string_view, const char*>, 7> kTemplates = {{
    {"chatml",
     "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
     "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"},
    {"llama3",
     "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
     "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
     "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"},
    {"llama2",
     "{% set ns = namespace(sys='') %}{% for m in messages %}{% if m['role'] == 'system' %}"
     "{% set ns.sys = '<<SYS>>\n' + m['content'] + '\n<</SYS>>\n\n' %}"
     "{% elif m['role'] == 'user' %}{{ bos_token }}[INST] {{ ns.sys }}{{ m['content'] | trim }} [/INST]"
     "{% set ns.sys = '' %}{% else %} {{ m['content'] | trim }} {{ eos_token }}{% endif %}{% endfor %}"},
    {"mistral",
     "{% set ns = namespace(sys='') %}{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
     "{% set ns.sys = m['content'] + '\n\n' %}"
     "{% elif m['role'] == 'user' %}[INST] {{ ns.sys }}{{ m['content'] | trim }} [/INST]{% set ns.sys = '' %}"
     "{% else %}{{ m['content'] | trim }}{{ eos_token }}{% endif %}{% endfor %}"},
    {"gemma",
     "{% set ns = namespace(sys='') %}{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
     "{% set ns.sys = m['content'] + '\n\n' %}{% else %}"
     "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n{{ ns.sys }}{{ m['content'] | trim }}"
     "<end_of_turn>\n{% set ns.sys = '' %}{% endif %}{% endfor %}"
     "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"},
    {"zephyr",
     "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
     "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"},
    {"phi3",
     "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
     "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"},
}};

}  // namespace

const char* named_chat_template(std::string_view name) {
  for (const auto& [n, source] : kTemplates) {
    if (n == name) return source;
  }
  return nullptr;
}

std::string named_chat_template_list() {
  std::string out;
  for (const auto& [n, source] : kTemplates) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

Result<ChatTemplateArg> resolve_chat_template_arg(const std::string& arg) {
  ChatTemplateArg out;
  std::error_code ec;
  if (const char* named = named_chat_template(arg)) {
    out.source = named;
    out.origin = "built-in " + arg;
  } else if (std::filesystem::is_regular_file(arg, ec)) {
    auto text = read_file(arg);
    if (!text.ok()) return invalid_argument("--chat-template {}: {}", arg, text.status().message());
    out.source = *text;
    out.origin = arg;
  } else if (arg.find("{{") != std::string::npos || arg.find("{%") != std::string::npos) {
    out.source = arg;
    out.origin = "inline (--chat-template)";
  } else {
    return invalid_argument("--chat-template '{}' is not a file, a Jinja template or a built-in name ({})", arg,
                            named_chat_template_list());
  }
  auto parsed = ChatTemplate::parse(out.source);
  if (!parsed.ok()) return invalid_argument("--chat-template {}: {}", arg, parsed.status().message());
  return out;
}

}  // namespace hz::cli
