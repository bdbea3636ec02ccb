// Reasoning split from chat replies: tags found in published templates, prompts that open the
// reasoning, finished replies split, and streamed replies whose deltas add up to the same split at
// every way of cutting them.
#include "chat/reasoning.h"

#include <gtest/gtest.h>

#include <random>

#include "chat/chat_formatter.h"
#include "support/test_support.h"

namespace hz {
namespace {

const ReasoningTags kThink{"<think>", "</think>"};

TEST(ReasoningTest, FindsTheTagsOfReasoningTemplates) {
  for (const char* name : {"Qwen-Qwen3-0.6B.jinja", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
                           "deepseek-ai-DeepSeek-V3.1.jinja"}) {
    auto tags = detect_reasoning_tags(test::chat_template_fixture(name));
    ASSERT_TRUE(tags.has_value()) << name;
    EXPECT_EQ(tags->open, "<think>");
    EXPECT_EQ(tags->close, "</think>");
  }
  for (const char* name : {"Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                           "mistralai-Mistral-Nemo-Instruct-2407.jinja", "google-gemma-2-2b-it.jinja"}) {
    EXPECT_FALSE(detect_reasoning_tags(test::chat_template_fixture(name)).has_value()) << name;
  }
  EXPECT_FALSE(detect_reasoning_tags("").has_value());
  auto mistral = detect_reasoning_tags("{{ '[THINK]' }}");
  ASSERT_TRUE(mistral.has_value());
  EXPECT_EQ(mistral->close, "[/THINK]");
}

TEST(ReasoningTest, KnowsVllmParserNames) {
  EXPECT_EQ(reasoning_tags_by_name("deepseek_r1")->open, "<think>");
  EXPECT_EQ(reasoning_tags_by_name("qwen3")->close, "</think>");
  EXPECT_EQ(reasoning_tags_by_name("mistral")->open, "[THINK]");
  EXPECT_FALSE(reasoning_tags_by_name("gpt-oss").has_value());
  EXPECT_FALSE(reasoning_tags_by_name("").has_value());
}

// The generation prompts the templates write: R1 opens the reasoning; Qwen3 leaves it to the
// model, or closes an empty one when thinking is turned off; V3.1 opens it only in thinking mode.
TEST(ReasoningTest, TellsWhetherThePromptOpensTheReasoning) {
  const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "Why is the sky blue? <think>"}}};
  auto render = [&](const char* name, nlohmann::ordered_json extra) {
    auto f = ChatFormatter::create(test::chat_template_fixture(name), "<s>", "</s>");
    EXPECT_TRUE(f.ok()) << name;
    auto p = f->format(messages, /*add_generation_prompt=*/true, extra);
    EXPECT_TRUE(p.ok()) << name << ": " << p.status().message();
    return p.ok() ? p->text : std::string();
  };
  const auto none = nlohmann::ordered_json::object();
  EXPECT_TRUE(prompt_opens_reasoning(render("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", none), kThink));
  EXPECT_FALSE(prompt_opens_reasoning(render("Qwen-Qwen3-0.6B.jinja", none), kThink));
  EXPECT_FALSE(prompt_opens_reasoning(render("Qwen-Qwen3-0.6B.jinja", {{"enable_thinking", false}}), kThink));
  EXPECT_TRUE(prompt_closes_reasoning(render("Qwen-Qwen3-0.6B.jinja", {{"enable_thinking", false}}), kThink));
  EXPECT_FALSE(prompt_closes_reasoning(render("Qwen-Qwen3-0.6B.jinja", none), kThink));
  EXPECT_TRUE(prompt_closes_reasoning(render("deepseek-ai-DeepSeek-V3.1.jinja", none), kThink));
  EXPECT_TRUE(prompt_opens_reasoning(render("deepseek-ai-DeepSeek-V3.1.jinja", {{"thinking", true}}), kThink));
  EXPECT_FALSE(prompt_opens_reasoning(render("deepseek-ai-DeepSeek-V3.1.jinja", none), kThink));
  EXPECT_TRUE(prompt_opens_reasoning("assistant: <think>\n \n", kThink));
  EXPECT_FALSE(prompt_opens_reasoning("<think>\n</think>\n\n", kThink));
  EXPECT_FALSE(prompt_opens_reasoning("", kThink));
}

TEST(ReasoningTest, SplitsAFinishedReply) {
  auto s = split_reasoning("<think>\nThe sky scatters blue.\n</think>\n\nRayleigh scattering.", kThink, false);
  EXPECT_TRUE(s.has_reasoning);
  EXPECT_EQ(s.reasoning, "The sky scatters blue.");
  EXPECT_EQ(s.content, "Rayleigh scattering.");

  s = split_reasoning("  \n<think>a</think>b", kThink, false);
  EXPECT_EQ(s.reasoning, "a");
  EXPECT_EQ(s.content, "b");

  // The prompt opened it: the reply has only the close tag.
  s = split_reasoning("Hmm.\n</think>\n\nAnswer.", kThink, true);
  EXPECT_TRUE(s.has_reasoning);
  EXPECT_EQ(s.reasoning, "Hmm.");
  EXPECT_EQ(s.content, "Answer.");

  // Cut by max_tokens inside the reasoning: no answer yet.
  s = split_reasoning("Let me think about", kThink, true);
  EXPECT_EQ(s.reasoning, "Let me think about");
  EXPECT_EQ(s.content, "");

  // Empty reasoning (Qwen3 with thinking off writes the empty block itself sometimes).
  s = split_reasoning("<think>\n\n</think>\n\nHi.", kThink, false);
  EXPECT_TRUE(s.has_reasoning);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "Hi.");

  // No reasoning: the reply is content, unchanged (whitespace and later tags included).
  s = split_reasoning("  Hello <think>x</think> there ", kThink, false);
  EXPECT_FALSE(s.has_reasoning);
  EXPECT_EQ(s.content, "  Hello <think>x</think> there ");
  s = split_reasoning("<thin", kThink, false);
  EXPECT_FALSE(s.has_reasoning);
  EXPECT_EQ(s.content, "<thin");

  // Only the first close tag ends the reasoning; later ones are the answer's.
  s = split_reasoning("a</think>b</think>c", kThink, true);
  EXPECT_EQ(s.reasoning, "a");
  EXPECT_EQ(s.content, "b</think>c");

  // Other tags.
  s = split_reasoning("[THINK]plan[/THINK]done", ReasoningTags{"[THINK]", "[/THINK]"}, false);
  EXPECT_EQ(s.reasoning, "plan");
  EXPECT_EQ(s.content, "done");
}

// Streams `reply` in the given pieces; the deltas must add up to the finished split, and nothing
// sent may be taken back (each delta is the next part of the final text).
void expect_stream_matches(const std::string& reply, bool inside, const std::vector<size_t>& cuts) {
  const ReasoningSplit want = split_reasoning(reply, kThink, inside);
  ReasoningStream stream(kThink, inside);
  std::string reasoning, content;
  size_t at = 0;
  for (size_t cut : cuts) {
    auto d = stream.feed(std::string_view(reply).substr(at, cut - at));
    reasoning += d.reasoning;
    content += d.content;
    at = cut;
    ASSERT_TRUE(want.reasoning.starts_with(reasoning)) << reply << " cut at " << cut << ": " << reasoning;
    ASSERT_TRUE(want.content.starts_with(content)) << reply << " cut at " << cut << ": " << content;
  }
  auto d = stream.feed(std::string_view(reply).substr(at));
  reasoning += d.reasoning;
  content += d.content;
  d = stream.finish();
  reasoning += d.reasoning;
  content += d.content;
  EXPECT_EQ(reasoning, want.reasoning) << reply;
  EXPECT_EQ(content, want.content) << reply;
}

TEST(ReasoningTest, StreamedDeltasAddUpToTheSplitAtEveryCut) {
  const std::vector<std::pair<std::string, bool>> replies = {
      {"<think>\nThe sky scatters blue.\n</think>\n\nRayleigh scattering.", false},
      {"Hmm, < and </ and </thin are not tags.\n</think>\n\nAnswer </think> here.", true},
      {"Let me think about it  \n", true},
      {"  <think></think>  \n x", false},
      {"  Hello <think>x</think>", false},
      {"<thi", false},
      {"<think", false},
      {"", false},
      {"", true},
      {"</think>", true},
      {"a </</think>", true},
  };
  for (const auto& [reply, inside] : replies) {
    expect_stream_matches(reply, inside, {});
    // Every single cut, and every byte on its own.
    for (size_t i = 0; i <= reply.size(); ++i) expect_stream_matches(reply, inside, {i});
    std::vector<size_t> bytes;
    for (size_t i = 0; i <= reply.size(); ++i) bytes.push_back(i);
    expect_stream_matches(reply, inside, bytes);
  }
  // Random cuts of random replies made of tag pieces, spaces and letters.
  std::mt19937 rng(7);
  const std::vector<std::string> parts = {"<think>", "</think>", "<", "</", "</thi", "think>", " ", "\n", "a", "bc"};
  for (int round = 0; round < 2000; ++round) {
    std::string reply;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) reply += parts[rng() % parts.size()];
    std::vector<size_t> cuts;
    for (size_t i = 1; i < reply.size(); ++i) {
      if (rng() % 3 == 0) cuts.push_back(i);
    }
    expect_stream_matches(reply, rng() % 2 == 0, cuts);
  }
}

// Reasoning that runs on without a close tag streams as it comes, holding back only what may be
// the start of the tag or the whitespace that may end the reasoning.
TEST(ReasoningTest, StreamsReasoningAsItComes) {
  ReasoningStream stream(kThink, /*inside=*/true);
  EXPECT_EQ(stream.feed("\nFirst").reasoning, "First");
  EXPECT_EQ(stream.feed(" step.").reasoning, " step.");
  auto d = stream.feed("\n</thi");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "");
  d = stream.feed("nk>\n\nThe answer");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "The answer");
  EXPECT_EQ(stream.feed(" is 4.").content, " is 4.");
  d = stream.finish();
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "");

  // Without reasoning, content is not held back once the reply cannot start with the tag.
  ReasoningStream plain(kThink, /*inside=*/false);
  EXPECT_EQ(plain.feed(" ").content, "");
  EXPECT_EQ(plain.feed("<").content, "");
  EXPECT_EQ(plain.feed("b").content, " <b");
  EXPECT_EQ(plain.feed(" <think>").content, " <think>");
}

}  // namespace
}  // namespace hz
