// `horizon chat` driven through a pipe: replies stream to stdout, the history grows, /reset
// forgets it, /exit quits, Ctrl-C stops a reply without ending the session.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "support/test_support.h"

namespace hz {
namespace {

std::string bin() { return HORIZON_BINARY; }
std::string model() { return test::model_path("stories260K.gguf"); }

// Runs chat with `input` on stdin.
int chat(const std::string& input, const std::string& flags, std::string* out, std::string* err) {
  std::string dir = test::make_temp_dir("chatin");
  { std::ofstream(dir + "/in") << input; }
  // In a subshell: run_command points the outer stdin at /dev/null.
  int rc = test::run_command("(cat " + dir + "/in | " + bin() + " chat -m " + model() + " --temp 0 -n 12 " + flags + ")", out, err);
  std::system(("rm -rf " + dir).c_str());
  return rc;
}

std::vector<int> prompt_token_counts(const std::string& err) {
  std::vector<int> counts;
  std::regex re(R"(\[(\d+) prompt tokens)");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), re); it != std::sregex_iterator(); ++it) counts.push_back(std::stoi((*it)[1]));
  return counts;
}

TEST(ChatCliTest, RepliesKeepHistoryAndResetForgetsIt) {
  std::string one, err1;
  ASSERT_EQ(chat("The little dog\n/exit\n", "", &one, &err1), 0) << err1;
  EXPECT_GT(one.size(), 1u);
  ASSERT_EQ(prompt_token_counts(err1).size(), 1u) << err1;

  // Two turns: the second prompt holds the first exchange too.
  std::string two, err2;
  ASSERT_EQ(chat("Once upon a time\nThe little dog\n", "", &two, &err2), 0) << err2;
  auto counts = prompt_token_counts(err2);
  ASSERT_EQ(counts.size(), 2u) << err2;
  EXPECT_GT(counts[1], counts[0] + prompt_token_counts(err1)[0] - 2);

  // After /reset the same question gets the same (greedy) answer as in a fresh session.
  std::string three, err3;
  ASSERT_EQ(chat("Once upon a time\n/reset\nThe little dog\n/exit\nignored after exit\n", "", &three, &err3), 0) << err3;
  EXPECT_NE(err3.find("(history cleared)"), std::string::npos);
  counts = prompt_token_counts(err3);
  ASSERT_EQ(counts.size(), 2u) << err3;
  EXPECT_EQ(counts[1], prompt_token_counts(err1)[0]);
  ASSERT_GE(three.size(), one.size());
  EXPECT_EQ(three.substr(three.size() - one.size()), one);
}

TEST(ChatCliTest, SystemMessageAndBadFlags) {
  std::string out, err;
  ASSERT_EQ(chat("Hi\n", "--system 'You tell stories.'", &out, &err), 0) << err;
  auto with_system = prompt_token_counts(err);
  ASSERT_EQ(chat("Hi\n", "", &out, &err), 0) << err;
  auto without = prompt_token_counts(err);
  ASSERT_EQ(with_system.size(), 1u);
  ASSERT_EQ(without.size(), 1u);
  EXPECT_GT(with_system[0], without[0]);

  EXPECT_EQ(chat("Hi\n", "--top-p 2", &out, &err), 1);
  EXPECT_NE(err.find("error: --top-p"), std::string::npos) << err;
  EXPECT_EQ(test::run_command(bin() + " chat -m " + model() + " -n 0", &out, &err), 1);
  EXPECT_NE(err.find("error: -n"), std::string::npos) << err;
  int rc = test::run_command(bin() + " chat -m /nonexistent.gguf", &out, &err);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("error:"), std::string::npos) << err;
}

// A template that opens the reasoning: the story stories260K tells is reasoning, shown on stderr
// and kept out of stdout and of the history; a budget closes it and the model answers on stdout;
// --reasoning-format none leaves it all in the reply.
TEST(ChatCliTest, ReasoningIsShownApartAndKeptApart) {
  const std::string tmpl = " --chat-template '{% for m in messages %}{{ m.content }}{% endfor %}<think>'";
  std::string out, err;
  ASSERT_EQ(chat("Once upon a time\nThe little dog\n", "-n 16" + tmpl, &out, &err), 0) << err;
  EXPECT_EQ(out, "\n\n") << "only the (empty) answers on stdout";
  EXPECT_NE(err.find(" was "), std::string::npos) << err;
  const std::vector<int> apart = prompt_token_counts(err);

  std::string raw_out, raw_err;
  ASSERT_EQ(chat("Once upon a time\nThe little dog\n", "-n 16 --reasoning-format none" + tmpl, &raw_out, &raw_err), 0)
      << raw_err;
  EXPECT_NE(raw_out.find(" was "), std::string::npos) << raw_out;
  const std::vector<int> kept = prompt_token_counts(raw_err);
  ASSERT_EQ(apart.size(), 2u) << err;
  ASSERT_EQ(kept.size(), 2u) << raw_err;
  EXPECT_EQ(apart[0], kept[0]);
  EXPECT_LT(apart[1] + 8, kept[1]) << "the reasoning is not in the history";

  std::string budget_out, budget_err;
  ASSERT_EQ(chat("Once upon a time\n", "-n 40 --reasoning-budget 6" + tmpl, &budget_out, &budget_err), 0) << budget_err;
  EXPECT_GT(budget_out.size(), 8u) << "an answer after the forced close: " << budget_err;
  EXPECT_EQ(budget_out.find("think>"), std::string::npos) << budget_out;
  EXPECT_NE(chat("Hi\n", "--reasoning-budget -2", &out, &err), 0);
  EXPECT_NE(err.find("--reasoning-budget"), std::string::npos) << err;
}

// Ctrl-C (SIGINT) during a long reply stops that reply; the session goes on to the next line.
TEST(ChatCliTest, InterruptStopsReplyNotSession) {
  std::string dir = test::make_temp_dir("chatint");
  std::string script = "set -e; mkfifo " + dir + "/in; " + bin() + " chat -m " + model() +
                       " --temp 0 -n 60000 --max-model-len 65536 --ignore-eos < " + dir + "/in > " + dir + "/out 2> " + dir +
                       "/err & pid=$!; exec 3> " + dir + "/in; echo 'Once upon a time' >&3; sleep 2; kill -INT $pid; sleep 1; "
                       "echo '/exit' >&3; exec 3>&-; set +e; wait $pid; echo $? > " + dir + "/rc";
  { std::ofstream(dir + "/run.sh") << script; }
  ASSERT_EQ(test::run_command("bash " + dir + "/run.sh"), 0);
  auto slurp = [&](const std::string& name) {
    std::ifstream in(dir + "/" + name);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(slurp("rc"), "0\n");
  std::string err = slurp("err");
  EXPECT_NE(err.find("stop: stopped by Ctrl-C"), std::string::npos) << err;
  EXPECT_GT(slurp("out").size(), 10u);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, std::regex(R"((\d+) generated, stop: stopped)"))) << err;
  EXPECT_LT(std::stoi(m[1]), 60000);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace hz
