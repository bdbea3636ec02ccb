// Chat templates: renders a conversation (OpenAI-style messages) to a prompt string with a
// model's Jinja chat template, in a sandboxed interpreter (no file or network access, bounded
// output, steps, depth and allocation), so that templates from untrusted files are safe to run.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/text_range.h"

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

// A rendered template and where input data landed in it.
struct RenderedText {
  std::string text;
  // Byte ranges of `text` that came from input data (message contents and roles, tools, extra
  // variables), through any filter or string operation; sorted, disjoint. The rest is the
  // template's own text (and trusted variables).
  std::vector<TextRange> input;
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
  // Like render(), and says which bytes came from input. `trusted`: variables whose text the
  // caller vouches for (bos_token, eos_token), rendered as template text; `extra` is input.
  Result<RenderedText> render_tagged(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                     const nlohmann::ordered_json& extra, const nlohmann::ordered_json& trusted) const;

  const std::string& source() const;

 private:
  struct Impl;
  explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  template <typename Json>
  Result<RenderedText> render_impl(const Json& messages, bool add_generation_prompt, const Json& extra,
                                   const Json& trusted) const;

  std::shared_ptr<const Impl> impl_;
};

}  // namespace hz
