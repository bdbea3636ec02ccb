#include "chat/reasoning.h"

#include <algorithm>
#include <array>
#include <utility>

namespace hz {
namespace {

constexpr std::string_view kSpace = " \t\r\n";

std::string_view ltrim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  return b == std::string_view::npos ? std::string_view() : s.substr(b);
}

std::string_view rtrim(std::string_view s) {
  const size_t e = s.find_last_not_of(kSpace);
  return e == std::string_view::npos ? std::string_view() : s.substr(0, e + 1);
}

std::string_view trim(std::string_view s) { return rtrim(ltrim(s)); }

ReasoningTags think_tags() { return {"<think>", "</think>"}; }
ReasoningTags mistral_tags() { return {"[THINK]", "[/THINK]"}; }

}  // namespace

std::optional<ReasoningTags> detect_reasoning_tags(std::string_view chat_template) {
  if (chat_template.find("<think>") != std::string_view::npos ||
      chat_template.find("</think>") != std::string_view::npos)
    return think_tags();
  if (chat_template.find("[THINK]") != std::string_view::npos) return mistral_tags();
  return std::nullopt;
}

std::optional<ReasoningTags> reasoning_tags_by_name(std::string_view name) {
  // vLLM's parser names for models that write <think> ... </think>.
  static constexpr std::array<std::string_view, 6> kThink = {"deepseek_r1", "deepseek_v3", "qwen3",
                                                              "glm45",       "minimax_m2",  "deepseek"};
  if (std::find(kThink.begin(), kThink.end(), name) != kThink.end()) return think_tags();
  if (name == "mistral") return mistral_tags();
  return std::nullopt;
}

size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (tag.starts_with(s.substr(s.size() - n))) return n;
  }
  return 0;
}

ReplyStart reply_start(std::string_view head, const ReasoningTags& tags, size_t* after_open) {
  const std::string_view start = ltrim(head);
  if (start.starts_with(tags.open)) {
    if (after_open != nullptr) *after_open = head.size() - start.size() + tags.open.size();
    return ReplyStart::kReasoning;
  }
  return std::string_view(tags.open).starts_with(start) ? ReplyStart::kUndecided : ReplyStart::kAnswer;
}

bool prompt_opens_reasoning(std::string_view prompt, const ReasoningTags& tags) {
  return rtrim(prompt).ends_with(tags.open);
}

bool prompt_closes_reasoning(std::string_view prompt, const ReasoningTags& tags) {
  return rtrim(prompt).ends_with(tags.close);
}

ReasoningSplit split_reasoning(std::string_view reply, const ReasoningTags& tags, bool inside) {
  ReasoningSplit out;
  std::string_view rest = reply;
  if (!inside) {
    size_t after_open = 0;
    if (reply_start(reply, tags, &after_open) != ReplyStart::kReasoning) {
      out.content = std::string(reply);
      return out;
    }
    rest = reply.substr(after_open);
  }
  out.has_reasoning = true;
  const size_t close = rest.find(tags.close);
  if (close == std::string_view::npos) {
    out.reasoning = std::string(trim(rest));
    return out;
  }
  out.reasoning = std::string(trim(rest.substr(0, close)));
  out.content = std::string(ltrim(rest.substr(close + tags.close.size())));
  return out;
}

ReasoningStream::ReasoningStream(ReasoningTags tags, bool inside) : tags_(std::move(tags)) {
  if (inside) {
    decided_ = true;
    has_reasoning_ = true;
  }
}

ReasoningStream::Delta ReasoningStream::feed(std::string_view text) {
  all_.append(text);
  return advance(/*at_end=*/false);
}

ReasoningStream::Delta ReasoningStream::finish() { return advance(/*at_end=*/true); }

ReasoningStream::Delta ReasoningStream::advance(bool at_end) {
  Delta d;
  const std::string_view all = all_;
  if (!decided_) {
    const ReplyStart start = reply_start(all, tags_, &reasoning_begin_);
    if (start == ReplyStart::kUndecided && !at_end) return d;  // only whitespace, or the beginning of the open tag
    decided_ = true;
    has_reasoning_ = start == ReplyStart::kReasoning;
  }
  // The part of `text` past `*sent`, which only ever grows.
  auto take = [](std::string_view text, size_t* sent) {
    std::string out;
    if (text.size() > *sent) out = std::string(text.substr(*sent));
    *sent = std::max(*sent, text.size());
    return out;
  };
  if (!has_reasoning_) {
    d.content = take(all, &content_sent_);
    return d;
  }
  if (!close_at_) {
    // Search only where a tag can end that was not there before.
    const size_t from = std::max(reasoning_begin_, scan_from_);
    const size_t found = all.find(tags_.close, from);
    if (found != std::string_view::npos) close_at_ = found;
    scan_from_ = all.size() >= tags_.close.size() ? all.size() - tags_.close.size() + 1 : 0;
  }
  if (close_at_) {
    d.reasoning = take(trim(all.substr(reasoning_begin_, *close_at_ - reasoning_begin_)), &reasoning_sent_);
    d.content = take(ltrim(all.substr(*close_at_ + tags_.close.size())), &content_sent_);
    return d;
  }
  std::string_view region = all.substr(reasoning_begin_);
  if (!at_end) region.remove_suffix(partial_tag_suffix(region, tags_.close));
  d.reasoning = take(trim(region), &reasoning_sent_);
  return d;
}

}  // namespace hz
