#include "server/chat_prompt.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace hz {
namespace {

// Formatters by (template, BOS, EOS): a server has one model, so this holds one entry; parsing
// once keeps template errors out of the request path after the first request.
Result<std::shared_ptr<const ChatFormatter>> cached_formatter(const ModelInfo& model) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, std::string, std::string>, std::shared_ptr<const ChatFormatter>> cache;
  auto key = std::make_tuple(model.chat_template, model.bos_token, model.eos_token);
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto f = ChatFormatter::create(model.chat_template, model.bos_token, model.eos_token);
  if (!f.ok()) return f.status();
  auto shared = std::make_shared<const ChatFormatter>(std::move(f).value());
  cache.emplace(std::move(key), shared);
  return shared;
}

}  // namespace

Result<ChatPrompt> render_chat_prompt(const ModelInfo& model, const std::vector<ChatMessage>& messages,
                                      const ToolRequest& tools, const ToolSetup& setup,
                                      const nlohmann::ordered_json& template_kwargs) {
  auto formatter = cached_formatter(model);
  if (!formatter.ok()) return Status(StatusCode::kInternal, "the model's " + formatter.status().message());
  const ToolCallFormat native = detect_tool_call_format(model.chat_template);
  // The request's chat_template_kwargs (names the server sets are refused when parsing it).
  nlohmann::ordered_json extra = template_kwargs.is_object() ? template_kwargs : nlohmann::ordered_json::object();
  if (native != ToolCallFormat::kNone && setup.format == native) extra["tools"] = tools.tools;
  auto render = [&](bool system_in_user) {
    return (*formatter)->format(template_messages(messages, native, setup.system_text, system_in_user),
                                /*add_generation_prompt=*/true, extra);
  };
  auto prompt = render(/*system_in_user=*/false);
  // A template without system turns (e.g. Gemma's refuses them) gets the tool description in the
  // first user turn instead.
  if (!prompt.ok() && !setup.system_text.empty()) prompt = render(/*system_in_user=*/true);
  if (!prompt.ok()) return invalid_argument("messages: the chat template refused them: {}", prompt.status().message());
  return prompt;
}

}  // namespace hz
