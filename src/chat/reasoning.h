// Reasoning ("thinking") in chat replies: models such as DeepSeek-R1, Qwen3, QwQ and Magistral
// write a chain of thought between tags (<think> ... </think>, [THINK] ... [/THINK]) before the
// answer. This splits a reply into that reasoning and the answer, whole or as it streams, so the
// server can return the reasoning apart (message.reasoning_content) and keep it out of content.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hz {

struct ReasoningTags {
  std::string open;   // "<think>"
  std::string close;  // "</think>"
};

// The tags a chat template writes: a template that mentions <think> or [THINK] belongs to a model
// that reasons; none for any other.
std::optional<ReasoningTags> detect_reasoning_tags(std::string_view chat_template);

// Tags by the name of a reasoning parser as vLLM's --reasoning-parser spells it (deepseek_r1,
// deepseek_v3, qwen3, glm45, minimax_m2, mistral; "deepseek" = <think>); none for any other.
std::optional<ReasoningTags> reasoning_tags_by_name(std::string_view name);

// Whether a rendered chat prompt leaves the model inside its reasoning: it ends with the open tag
// (then only whitespace), as DeepSeek-R1's and Qwen3-Thinking's templates write the generation
// prompt. Such a reply starts with reasoning and has only the close tag.
bool prompt_opens_reasoning(std::string_view prompt, const ReasoningTags& tags);
// Whether it ends with the close tag (then whitespace): the template wrote an empty reasoning, as
// Qwen3's does with enable_thinking false, and the reply is all answer.
bool prompt_closes_reasoning(std::string_view prompt, const ReasoningTags& tags);

// How a reply starts when the prompt did not open the reasoning, from its first bytes `head`: with
// the open tag after whitespace (reasoning; `*after_open`, if given, is the offset past the tag),
// with anything else (answer), or not known yet (only whitespace or the beginning of the tag).
enum class ReplyStart { kUndecided, kReasoning, kAnswer };
ReplyStart reply_start(std::string_view head, const ReasoningTags& tags, size_t* after_open = nullptr);

// The length of the longest suffix of `s` that is a proper prefix of `tag` (it may become the tag).
size_t partial_tag_suffix(std::string_view s, std::string_view tag);

struct ReasoningSplit {
  bool has_reasoning = false;  // the reply began with reasoning (possibly empty)
  std::string reasoning;       // without the tags, trimmed of whitespace at both ends
  std::string content;         // the answer after the close tag, without its leading whitespace
};

// Splits a finished reply. `inside`: the prompt opened the reasoning (prompt_opens_reasoning);
// otherwise only a reply that starts (after whitespace) with the open tag has reasoning, and any
// other reply is all content, unchanged. Reasoning that never closes (cut by max_tokens) is all
// reasoning, with empty content. Tags after the answer has begun are content.
ReasoningSplit split_reasoning(std::string_view reply, const ReasoningTags& tags, bool inside);

// The same split for a reply that arrives in pieces: each feed returns the text that is certain
// now. The concatenated deltas equal split_reasoning of the whole reply, however it was cut: text
// that may begin a tag, and whitespace that may end the reasoning, wait for what follows.
class ReasoningStream {
 public:
  ReasoningStream(ReasoningTags tags, bool inside);

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  Delta feed(std::string_view text);
  // At the end of the reply: whatever was held back.
  Delta finish();

 private:
  Delta advance(bool at_end);

  ReasoningTags tags_;
  std::string all_;                  // the reply so far
  bool decided_ = false;             // whether the reply has reasoning is known
  bool has_reasoning_ = false;
  size_t reasoning_begin_ = 0;       // offset in all_ where the reasoning starts (after the open tag)
  std::optional<size_t> close_at_;   // offset of the close tag, once found
  size_t scan_from_ = 0;             // where the next search for the close tag starts
  size_t reasoning_sent_ = 0;        // bytes of the (trimmed) reasoning sent
  size_t content_sent_ = 0;          // bytes of the content sent
};

}  // namespace hz
