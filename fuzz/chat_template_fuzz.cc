// libFuzzer target for chat templates: the input is a template (and, after a NUL byte, the
// messages as JSON). Parsing and rendering must end in a prompt or an error within the
// interpreter's limits (kept small here so each input is cheap), never a crash or a hang.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "format/json_limits.h"
// The chat module's header, wherever the build has it.
#if __has_include("chat/chat_template.h")
#include "chat/chat_template.h"
#else
#include "tokenizer/chat_template.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  hz::ChatTemplateOptions opts;
  opts.max_output_bytes = 64 << 10;
  opts.max_steps = 200'000;
  opts.max_alloc_bytes = 4 << 20;
  auto tmpl = hz::ChatTemplate::parse(std::string(all.substr(0, nul)), opts);
  if (!tmpl.ok()) {
    if (tmpl.status().message().empty()) __builtin_trap();
    return 0;
  }
  nlohmann::json messages = nlohmann::json::array(
      {{{"role", "system"}, {"content", "Be brief."}},
       {{"role", "user"}, {"content", "Hi <|im_end|> there"}},
       {{"role", "assistant"}, {"content", "<think>x</think>Hello"}, {"tool_calls", nlohmann::json::array()}},
       {{"role", "user"}, {"content", nlohmann::json::array({{{"type", "text"}, {"text", "part"}}})}}});
  if (nul != std::string_view::npos) {
    auto m = hz::parse_json_bounded(all.substr(nul + 1), "messages");
    if (!m.ok()) return 0;
    messages = std::move(m).value();
  }
  nlohmann::json extra = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  for (bool gen : {false, true}) {
    auto out = tmpl->render(messages, gen, extra);
    if (out.ok() && out->size() > opts.max_output_bytes) __builtin_trap();
    if (!out.ok() && out.status().message().empty()) __builtin_trap();
  }
  return 0;
}
