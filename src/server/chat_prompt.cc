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

Result<ChatPrompt> render_chat_prompt(const ModelInfo& model, const std::vector<ChatMessage>& messages) {
  auto formatter = cached_formatter(model);
  if (!formatter.ok()) return Status(StatusCode::kInternal, "the model's " + formatter.status().message());
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  auto prompt = (*formatter)->format(msgs, /*add_generation_prompt=*/true);
  if (!prompt.ok()) return invalid_argument("messages: the chat template refused them: {}", prompt.status().message());
  return prompt;
}

}  // namespace hz
