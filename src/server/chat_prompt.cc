#include "server/chat_prompt.h"

#include <map>
#include <memory>
#include <mutex>

#include "chat/chat_template.h"

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

namespace {

// Parsed templates by source: a server has one model, so this holds one entry; parsing once
// keeps template errors out of the request path after the first request.
Result<std::shared_ptr<const ChatTemplate>> cached_template(const std::string& source) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const ChatTemplate>> cache;
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache.find(source);
  if (it != cache.end()) return it->second;
  auto parsed = ChatTemplate::parse(source);
  if (!parsed.ok()) return parsed.status();
  auto t = std::make_shared<const ChatTemplate>(std::move(parsed).value());
  cache.emplace(source, t);
  return t;
}

}  // namespace

Result<std::string> render_chat_prompt(const ModelInfo& model, const std::vector<ChatMessage>& messages) {
  if (model.chat_template.empty()) return render_default_chat_prompt(messages);
  auto tmpl = cached_template(model.chat_template);
  if (!tmpl.ok()) return Status(StatusCode::kInternal, "the model's chat template does not parse: " + tmpl.status().message());
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  nlohmann::ordered_json extra = {{"bos_token", model.bos_token}, {"eos_token", model.eos_token}};
  auto text = (*tmpl)->render(msgs, /*add_generation_prompt=*/true, extra);
  if (!text.ok()) return invalid_argument("messages: the chat template refused them: {}", text.status().message());
  std::string out = std::move(text).value();
  // The server tokenizes with add_special=true, which adds BOS where the model wants it; drop a
  // BOS the template wrote itself so it is not doubled.
  if (!model.bos_token.empty() && out.compare(0, model.bos_token.size(), model.bos_token) == 0) out.erase(0, model.bos_token.size());
  return out;
}

}  // namespace hz
