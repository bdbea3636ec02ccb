// ChatFormatter: the built-in ChatML default, the model's template and the BOS rule.
#include "chat/chat_formatter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include "support/test_support.h"

namespace hz {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

TEST(ChatFormatterTest, DefaultIsChatMl) {
  ChatFormatter f = ChatFormatter::chatml();
  EXPECT_TRUE(f.is_default());
  Json msgs = Json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"U"},
                              {"role":"assistant","content":null}])");
  auto r = f.format(msgs, true);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"
                     "<|im_start|>assistant\n");
  EXPECT_TRUE(r->add_special);
  // "developer" is OpenAI's newer name for "system".
  r = f.format(Json::parse(R"([{"role":"developer","content":"D"}])"), false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "<|im_start|>system\nD<|im_end|>\n");
  // It agrees with the published Qwen2 ChatML template when a system message is given.
  auto qwen = ChatFormatter::create(test::chat_template_fixture("Qwen-Qwen2-0.5B-Instruct.jinja"), "", "<|im_end|>");
  ASSERT_TRUE(qwen.ok());
  EXPECT_FALSE(qwen->is_default());
  msgs = Json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"U"}])");
  EXPECT_EQ(f.format(msgs)->text, qwen->format(msgs)->text);
  // An empty template source selects the default too.
  auto empty = ChatFormatter::create("", "", "");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->is_default());
}

TEST(ChatFormatterTest, TemplateThatWritesBosGetsExactlyThatOne) {
  Json msgs = Json::parse(R"([{"role":"user","content":"Hi"}])");
  auto llama3 = ChatFormatter::create(test::chat_template_fixture("meta-llama-Meta-Llama-3-8B-Instruct.jinja"), "<|begin_of_text|>",
                                      "<|eot_id|>");
  ASSERT_TRUE(llama3.ok()) << llama3.status().to_string();
  auto r = llama3->format(msgs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->text.rfind("<|begin_of_text|>", 0), 0u);
  EXPECT_FALSE(r->add_special);  // the template's BOS is parsed from the text; none is added
  // A template without BOS leaves it to the vocabulary.
  auto qwen = ChatFormatter::create(test::chat_template_fixture("Qwen-Qwen2-0.5B-Instruct.jinja"), "<|endoftext|>", "<|im_end|>");
  ASSERT_TRUE(qwen.ok());
  EXPECT_TRUE(qwen->format(msgs)->add_special);
}

TEST(ChatFormatterTest, ErrorsNameTheCause) {
  auto bad = ChatFormatter::create("{% for %}", "", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("chat template does not parse"));
  auto refuses = ChatFormatter::create("{{ raise_exception('no system messages') }}", "", "");
  ASSERT_TRUE(refuses.ok());
  auto r = refuses->format(Json::array());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("no system messages"));
  r = ChatFormatter::chatml().format(Json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("messages must be a JSON array"));
  r = ChatFormatter::chatml().format(Json::array(), true, Json::array());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("extra variables must be a JSON object"));
}

}  // namespace
}  // namespace hz
