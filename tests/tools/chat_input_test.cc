// `horizon chat`'s input loop through a pipe: slash commands answered locally, and a conversation
// that fills the context keeps going by dropping its oldest turns.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "support/test_support.h"

namespace hz {
namespace {

int chat(const std::string& input, const std::string& flags, std::string* out, std::string* err) {
  std::string dir = test::make_temp_dir("chatinput");
  { std::ofstream(dir + "/in") << input; }
  int rc = test::run_command("(cat " + dir + "/in | " + std::string(HORIZON_BINARY) + " chat -m " +
                                 test::model_path("stories260K.gguf") + " --temp 0 -n 12 " + flags + ")",
                             out, err);
  std::system(("rm -rf " + dir).c_str());
  return rc;
}

int replies(const std::string& err) {
  std::regex re(R"(\[\d+ prompt tokens)");
  return static_cast<int>(std::distance(std::sregex_iterator(err.begin(), err.end(), re), std::sregex_iterator()));
}

TEST(ChatInputTest, SlashCommandsAreAnsweredLocally) {
  std::string out, err;
  ASSERT_EQ(chat("/help\n/nosuch\n/clear\n/exit\n", "", &out, &err), 0) << err;
  EXPECT_NE(err.find("/clear         forget the conversation"), std::string::npos) << err;
  EXPECT_NE(err.find("unknown command /nosuch"), std::string::npos) << err;
  EXPECT_NE(err.find("(history cleared)"), std::string::npos) << err;
  EXPECT_EQ(replies(err), 0) << "nothing went to the model: " << err;
  // A message that starts with a slash is sent with //.
  ASSERT_EQ(chat("//help me\n", "", &out, &err), 0) << err;
  EXPECT_EQ(replies(err), 1) << err;
}

TEST(ChatInputTest, FullContextDropsTheOldestTurnsAndGoesOn) {
  std::string input;
  for (int i = 0; i < 6; ++i) input += "Tell me about the little dog and the big red ball number " + std::to_string(i) + "\n";
  std::string out, err;
  ASSERT_EQ(chat(input, "--max-model-len 128", &out, &err), 0) << err;
  EXPECT_EQ(replies(err), 6) << err;  // every message got a reply
  EXPECT_NE(err.find("(context full: dropped the oldest"), std::string::npos) << err;
  EXPECT_EQ(err.find("error:"), std::string::npos) << err;
  // A single message longer than the context is refused, and the session goes on.
  std::string long_line;
  for (int i = 0; i < 100; ++i) long_line += "dog cat ball ";
  ASSERT_EQ(chat(long_line + "\nhi\n", "--max-model-len 128", &out, &err), 0) << err;
  EXPECT_NE(err.find("fills the context of 128 tokens by itself"), std::string::npos) << err;
  EXPECT_EQ(replies(err), 1) << err;
}

}  // namespace
}  // namespace hz
