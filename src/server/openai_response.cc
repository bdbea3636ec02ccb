#include "server/openai_response.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "server/json_text.h"
#include "server/sse.h"

namespace hz {
namespace {

// Insertion order: completions top_logprobs objects list alternatives from the most probable down.
using json = nlohmann::ordered_json;

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}
json chat_logprobs(const std::vector<TokenLogprob>& chosen, const std::vector<std::vector<TokenLogprob>>& top) {
  json content = json::array();
  for (size_t i = 0; i < chosen.size(); ++i) {
    json alts = json::array();
    if (i < top.size()) {
      for (const TokenLogprob& t : top[i]) {
        alts.push_back({{"token", t.text}, {"logprob", t.logprob}, {"bytes", bytes_of(t.text)}});
      }
    }
    content.push_back({{"token", chosen[i].text},
                       {"logprob", chosen[i].logprob},
                       {"bytes", bytes_of(chosen[i].text)},
                       {"top_logprobs", alts}});
  }
  return {{"content", content}};
}

// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}
json completion_logprobs(const std::vector<TokenLogprob>& chosen, const std::vector<std::vector<TokenLogprob>>& top,
                         int64_t* offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < chosen.size(); ++i) {
    tokens.push_back(chosen[i].text);
    if (std::isnan(chosen[i].logprob)) {  // an echoed prompt's first token: nothing before it
      lps.push_back(nullptr);
      tops.push_back(nullptr);
    } else {
      lps.push_back(chosen[i].logprob);
      json alts = json::object();
      if (i < top.size()) {
        for (const TokenLogprob& t : top[i]) alts[t.text] = t.logprob;
      }
      tops.push_back(alts);
    }
    offsets.push_back(*offset);
    *offset += static_cast<int64_t>(chosen[i].text.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// An echoed prompt's logprobs: as completion_logprobs from offset 0, where the pieces may spell
// more than the echoed text before it (SentencePiece's leading space, a BOS piece): offsets are
// then shifted back by that much, so each points into `echo_text`.
json prompt_logprobs(const std::vector<TokenLogprob>& chosen, const std::vector<std::vector<TokenLogprob>>& top,
                     const std::string& echo_text) {
  int64_t offset = 0;
  json lp = completion_logprobs(chosen, top, &offset);
  std::string spelled;
  for (const TokenLogprob& t : chosen) spelled += t.text;
  if (spelled.size() > echo_text.size() && spelled.ends_with(echo_text)) {
    const auto skew = static_cast<int64_t>(spelled.size() - echo_text.size());
    for (auto& v : lp["text_offset"]) v = std::max<int64_t>(0, v.get<int64_t>() - skew);
  }
  return lp;
}

}  // namespace

const char* openai_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength:
    case FinishReason::kTimeout: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
  }
  return "stop";
}

std::optional<ApiError> finish_error(const GenerationEvent& e) {
  if (e.finish_reason == FinishReason::kError) {
    ApiError err;
    err.http_status = 500;
    err.type = "server_error";
    err.message = e.error.ok() ? "the engine failed this request" : e.error.message();
    if (e.error.code() == StatusCode::kDeadlineExceeded) {  // --first-token-timeout
      err.http_status = 504;
      err.type = "timeout";
      err.code = "first_token_timeout";
    }
    return err;
  }
  if (e.finish_reason == FinishReason::kCancelled) {
    ApiError err;
    err.http_status = 503;
    err.type = "service_unavailable";
    err.code = "request_cancelled";
    err.message = "the request was cancelled (server shutting down)";
    return err;
  }
  return std::nullopt;
}

CompletionAssembler::CompletionAssembler(ResponseContext ctx) : ctx_(std::move(ctx)) {
  if (ctx_.echo_prompt) text_offset_ = static_cast<int64_t>(ctx_.echo_text.size());
  if (ctx_.shape == ReplyShape::kAnthropic) {
    writer_ = std::make_unique<AnthropicWriter>(ctx_.id, ctx_.model, ctx_.prompt_tokens, ctx_.reply_format());
  } else if (ctx_.shape == ReplyShape::kResponses) {
    writer_ = std::make_unique<ResponsesWriter>(ctx_.id, ctx_.model, ctx_.created, ctx_.echo, ctx_.reply_format());
  } else if (ctx_.kind == ApiKind::kChat && ctx_.reply_format().parses()) {
    reply_stream_.emplace(ctx_.reply_format());
  }
}

const char* CompletionAssembler::finish_reason(const GenerationEvent& e, bool has_calls) const {
  // A reply cut by max_tokens keeps "length" (its calls may be incomplete).
  if (has_calls && e.finish_reason == FinishReason::kStop) return "tool_calls";
  return openai_finish_reason(e.finish_reason);
}

json CompletionAssembler::tool_calls_json(const std::vector<ToolCall>& calls) const {
  std::string seed = ctx_.id.substr(std::min<size_t>(ctx_.id.find('-') + 1, ctx_.id.size()));
  // Several choices: each one's calls get ids of their own (the first two hex digits name the choice).
  if (ctx_.num_choices > 1 && seed.size() >= 2) seed = fmt::format("{:02x}", ctx_.choice_index & 0xff) + seed.substr(2);
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back({{"id", tool_call_id(seed, i, ctx_.tool_format)},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  }
  return out;
}

std::string CompletionAssembler::delta_chunk(const json& delta) const {
  json choice = {{"index", ctx_.choice_index}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  json j = {{"id", ctx_.id},
            {"object", "chat.completion.chunk"},
            {"created", ctx_.created},
            {"model", ctx_.model},
            {"choices", json::array({choice})}};
  if (ctx_.include_usage) j["usage"] = nullptr;
  return sse_data(dump_json(j));
}

std::string CompletionAssembler::chunk(const std::string& text, const GenerationEvent* src, const char* finish) const {
  return chunk_with(text, logprobs_of(src), finish);
}

json CompletionAssembler::logprobs_of(const GenerationEvent* src) const {
  if (src == nullptr || !ctx_.logprobs) return nullptr;
  int64_t offset = text_offset_;
  return ctx_.kind == ApiKind::kChat ? chat_logprobs(src->chosen, src->top)
                                     : completion_logprobs(src->chosen, src->top, &offset);
}

std::string CompletionAssembler::chunk_with(const std::string& text, json logprobs, const char* finish,
                                            const std::string& reasoning) const {
  json choice = {{"index", ctx_.choice_index}, {"logprobs", std::move(logprobs)}, {"finish_reason", nullptr}};
  if (finish != nullptr) choice["finish_reason"] = finish;
  json j = {{"id", ctx_.id}, {"created", ctx_.created}, {"model", ctx_.model}};
  if (ctx_.kind == ApiKind::kChat) {
    j["object"] = "chat.completion.chunk";
    json delta = json::object();
    if (finish == nullptr) {
      if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
      if (!text.empty() || reasoning.empty()) delta["content"] = text;
    }
    choice["delta"] = std::move(delta);
  } else {
    j["object"] = "text_completion";
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  if (ctx_.include_usage) j["usage"] = nullptr;  // OpenAI: null on every chunk but the usage one
  return sse_data(dump_json(j));
}

std::string CompletionAssembler::stream_start() {
  if (writer_) return writer_->stream_start();
  if (ctx_.kind != ApiKind::kChat) {
    // The echoed prompt first; with logprobs it waits for the prompt's (stream_tokens).
    return ctx_.echo_prompt && !ctx_.logprobs && !ctx_.echo_text.empty() ? chunk(ctx_.echo_text, nullptr, nullptr) : "";
  }
  json choice = {{"index", ctx_.choice_index},
                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  json j = {{"id", ctx_.id},
            {"object", "chat.completion.chunk"},
            {"created", ctx_.created},
            {"model", ctx_.model},
            {"choices", json::array({choice})}};
  if (ctx_.include_usage) j["usage"] = nullptr;
  return sse_data(dump_json(j));
}

std::string CompletionAssembler::stream_tokens(const GenerationEvent& e) {
  if (writer_) {
    text_ += e.text;
    note_tokens(e);
    return writer_->stream_tokens(e);
  }
  if (reply_stream_) {
    // Reasoning and content stream as they come; text that may be a tag or a tool call waits.
    const ReasoningStream::Delta d = reply_stream_->feed(e.text);
    text_ += e.text;
    note_tokens(e);
    if (d.reasoning.empty() && d.content.empty() && !(ctx_.logprobs && !e.chosen.empty())) return "";
    return chunk_with(d.content, logprobs_of(&e), nullptr, d.reasoning);
  }
  std::string out;
  if (ctx_.echo_prompt && ctx_.logprobs && !e.prompt_chosen.empty()) {
    out += chunk_with(ctx_.echo_text, prompt_logprobs(e.prompt_chosen, e.prompt_top, ctx_.echo_text), nullptr);
  }
  if (e.text.empty() && !(ctx_.logprobs && !e.chosen.empty())) return out;
  out += chunk(e.text, &e, nullptr);
  text_ += e.text;
  note_tokens(e);
  for (const TokenLogprob& t : e.chosen) text_offset_ += static_cast<int64_t>(t.text.size());
  return out;
}

std::string CompletionAssembler::usage_json(const GenerationEvent& e, int32_t reasoning_tokens) const {
  json usage = {{"prompt_tokens", e.prompt_tokens},
                {"completion_tokens", e.completion_tokens},
                {"total_tokens", e.prompt_tokens + e.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", e.cached_tokens}}}};
  if (reasoning_tokens >= 0) usage["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
  return dump_json(usage);
}

void CompletionAssembler::note_tokens(const GenerationEvent& e) {
  if (ctx_.reasoning) token_spans_.emplace_back(text_.size(), static_cast<int32_t>(e.token_ids.size()));
}

int32_t CompletionAssembler::reasoning_tokens() const {
  if (!ctx_.reasoning) return 0;
  const ReasoningTags& tags = *ctx_.reasoning;
  // Where the reasoning ends in the reply (after its close tag, or the whole reply while it is open).
  size_t from = 0;
  if (!ctx_.reasoning_inside) {
    const size_t start = text_.find_first_not_of(" \t\r\n");
    if (start == std::string::npos || text_.compare(start, tags.open.size(), tags.open) != 0) return 0;
    from = start + tags.open.size();
  }
  const size_t close = text_.find(tags.close, from);
  int32_t n = 0;
  size_t begin = 0;  // where each event's text starts
  for (const auto& [after, tokens] : token_spans_) {
    if (close == std::string::npos || begin < close + tags.close.size()) n += tokens;  // open: every token
    begin = after;
  }
  return n;
}

std::string CompletionAssembler::stream_finish(const GenerationEvent& e) {
  if (writer_) return stream_end(e);
  if (auto err = finish_error(e)) {
    // Headers are gone already; OpenAI-compatible servers report mid-stream failures as an error event.
    std::string out = sse_data(api_error_body(*err));
    out += kSseDone;
    return out;
  }
  return stream_finish_choice(e) + stream_end(e);
}

std::string CompletionAssembler::stream_finish_choice(const GenerationEvent& e) {
  if (writer_) return "";  // its last events come with stream_end
  std::string out;
  const char* finish = openai_finish_reason(e.finish_reason);
  if (reply_stream_) {
    const ReplyParts end = reply_stream_->finish();
    if (!end.reasoning.empty()) out += delta_chunk({{"reasoning_content", end.reasoning}});
    if (!end.answer.content.empty()) out += delta_chunk({{"content", end.answer.content}});
    // OpenAI's shape: per call, a delta with its index, id, type and name, then its arguments.
    const json calls = tool_calls_json(end.answer.tool_calls);
    for (size_t i = 0; i < calls.size(); ++i) {
      json head = {{"index", i}, {"id", calls[i]["id"]}, {"type", "function"},
                   {"function", {{"name", calls[i]["function"]["name"]}, {"arguments", ""}}}};
      out += delta_chunk({{"tool_calls", json::array({head})}});
      json args = {{"index", i}, {"function", {{"arguments", calls[i]["function"]["arguments"]}}}};
      out += delta_chunk({{"tool_calls", json::array({args})}});
    }
    finish = finish_reason(e, !end.answer.tool_calls.empty());
  }
  out += chunk("", nullptr, finish);
  return out;
}

std::string CompletionAssembler::stream_end(const GenerationEvent& usage, int32_t reasoning_tokens) {
  if (reasoning_tokens < 0 && ctx_.reasoning) reasoning_tokens = this->reasoning_tokens();
  if (writer_) {
    writer_->set_reasoning_tokens(std::max(reasoning_tokens, 0));
    return writer_->stream_finish(usage);
  }
  std::string out;
  if (ctx_.include_usage) {
    json j = {{"id", ctx_.id},
              {"object", ctx_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
              {"created", ctx_.created},
              {"model", ctx_.model},
              {"choices", json::array()},
              {"usage", json::parse(usage_json(usage, ctx_.reasoning ? reasoning_tokens : -1))}};
    out += sse_data(dump_json(j));
  }
  out += kSseDone;
  return out;
}

void CompletionAssembler::add_tokens(const GenerationEvent& e) {
  text_ += e.text;
  note_tokens(e);
  if (!e.prompt_chosen.empty()) {
    prompt_chosen_ = e.prompt_chosen;
    prompt_top_ = e.prompt_top;
  }
  if (ctx_.logprobs) {
    chosen_.insert(chosen_.end(), e.chosen.begin(), e.chosen.end());
    top_.insert(top_.end(), e.top.begin(), e.top.end());
  }
}

json CompletionAssembler::choice_json(const GenerationEvent& e) const {
  json choice = {{"index", ctx_.choice_index}, {"logprobs", nullptr}, {"finish_reason", openai_finish_reason(e.finish_reason)}};
  if (ctx_.kind == ApiKind::kChat) {
    ReplyParts reply = read_reply(text_, ctx_.reply_format());
    choice["message"] = {{"role", "assistant"}, {"content", reply.answer.content}};
    if (reply.has_reasoning) choice["message"]["reasoning_content"] = std::move(reply.reasoning);
    if (!reply.answer.tool_calls.empty()) {
      if (reply.answer.content.empty()) choice["message"]["content"] = nullptr;  // as OpenAI sends a pure call
      choice["message"]["tool_calls"] = tool_calls_json(reply.answer.tool_calls);
      choice["finish_reason"] = finish_reason(e, true);
    }
    if (ctx_.logprobs) choice["logprobs"] = chat_logprobs(chosen_, top_);
  } else {
    choice["text"] = ctx_.echo_prompt ? ctx_.echo_text + text_ : text_;
    if (ctx_.logprobs) {
      int64_t offset = 0;
      json lp;
      if (ctx_.echo_prompt) {
        // The prompt's tokens first (offsets from 0), then the generated ones after the echoed text.
        lp = prompt_logprobs(prompt_chosen_, prompt_top_, ctx_.echo_text);
        offset = static_cast<int64_t>(ctx_.echo_text.size());
        json generated = completion_logprobs(chosen_, top_, &offset);
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
          for (auto& v : generated[key]) lp[key].push_back(std::move(v));
        }
      } else {
        lp = completion_logprobs(chosen_, top_, &offset);
      }
      choice["logprobs"] = std::move(lp);
    }
  }
  return choice;
}

std::string CompletionAssembler::final_body(const GenerationEvent& e) const { return merged_body({this}, {&e}, e); }

std::string CompletionAssembler::merged_body(const std::vector<const CompletionAssembler*>& parts,
                                             const std::vector<const GenerationEvent*>& finished,
                                             const GenerationEvent& usage) {
  if (parts.front()->writer_) {  // Anthropic's or the Responses shapes: one choice
    HZ_CHECK(parts.size() == 1);
    parts.front()->writer_->set_reasoning_tokens(parts.front()->reasoning_tokens());
    return parts.front()->writer_->body(parts.front()->text_, *finished.front());
  }
  const ResponseContext& ctx = parts.front()->ctx_;
  json j = {{"id", ctx.id}, {"created", ctx.created}, {"model", ctx.model}};
  j["object"] = ctx.kind == ApiKind::kChat ? "chat.completion" : "text_completion";
  json choices = json::array();
  for (size_t i = 0; i < parts.size(); ++i) choices.push_back(parts[i]->choice_json(*finished[i]));
  j["choices"] = std::move(choices);
  int32_t reasoning_tokens = -1;
  if (ctx.reasoning) {
    reasoning_tokens = 0;
    for (const CompletionAssembler* p : parts) reasoning_tokens += p->reasoning_tokens();
  }
  j["usage"] = json::parse(parts.front()->usage_json(usage, reasoning_tokens));
  return dump_json(j);
}

}  // namespace hz
