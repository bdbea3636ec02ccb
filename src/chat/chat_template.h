// Chat templates: renders a conversation (OpenAI-style messages) to a prompt string with a
// model's Jinja chat template, in a sandboxed interpreter (no file or network access, bounded
// output, steps, depth and allocation), so that templates from untrusted files are safe to run.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace hz {

namespace jinja {
struct Stmt;
}

struct ChatTemplateOptions {
  size_t max_output_bytes = 1 << 20;      // rendered prompt size (also each macro/block capture)
  uint64_t max_steps = 10'000'000;         // evaluated nodes, loop iterations, builtin work items
  int max_depth = 64;                      // block/bracket nesting, macro recursion, value nesting
  uint64_t max_alloc_bytes = 64ull << 20;  // cumulative bytes of strings and lists a render creates
};

// A parsed template. Cheap to copy (the syntax tree is shared and immutable); render() is const
// and safe to call from several threads at once.
class ChatTemplate {
 public:
  // Parses a template; syntax errors name line:col. `include`, `import` and `extends` are refused.
  static Result<ChatTemplate> parse(std::string source, ChatTemplateOptions opts = {});

  // messages: a JSON array of {role, content, ...}; extra: bos_token, eos_token, tools and any
  // other variables the template reads. Object key order is kept for ordered_json input
  // (tojson output follows it); nlohmann::json sorts keys. raise_exception(msg) in the
  // template yields an InvalidArgument status whose message contains msg; exceeding a limit
  // yields ResourceExhausted.
  Result<std::string> render(const nlohmann::json& messages, bool add_generation_prompt,
                             const nlohmann::json& extra = {}) const;
  Result<std::string> render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                             const nlohmann::ordered_json& extra = {}) const;

  // The template used when a model has none: ChatML (<|im_start|>role\ncontent<|im_end|>\n),
  // with "<|im_start|>assistant\n" as the generation prompt.
  static const char* default_template_source();

  const std::string& source() const;

 private:
  struct Impl;
  explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  template <typename Json>
  Result<std::string> render_impl(const Json& messages, bool add_generation_prompt, const Json& extra) const;

  std::shared_ptr<const Impl> impl_;
};

}  // namespace hz
