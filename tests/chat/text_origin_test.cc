// Where rendered text came from: ChatTemplate::render_tagged keeps the origin of input strings
// (message contents, roles, keys, tools) through filters, methods, slicing and captures.
#include <gtest/gtest.h>

#include "chat/chat_template.h"

namespace hz {
namespace {

using Json = nlohmann::ordered_json;

struct Tagged {
  std::string text;
  std::vector<std::string> input;  // the input parts, in order
};

Tagged render(const std::string& source, const std::vector<std::string>& contents, Json extra = Json::object()) {
  auto t = ChatTemplate::parse(source);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  Json msgs = Json::array();
  for (const std::string& c : contents) msgs.push_back({{"role", "user"}, {"content", c}});
  auto r = t->render_tagged(msgs, false, extra, Json{{"bos_token", "<s>"}});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  Tagged out{r->text, {}};
  size_t prev_end = 0;
  for (const TextRange& x : r->input) {
    EXPECT_LT(x.begin, x.end);
    EXPECT_LE(x.end, r->text.size());
    if (!out.input.empty()) {
      EXPECT_GT(x.begin, prev_end);  // sorted, disjoint, not adjacent
    }
    prev_end = x.end;
    out.input.push_back(r->text.substr(x.begin, x.end - x.begin));
  }
  return out;
}

using V = std::vector<std::string>;

TEST(TextOriginTest, ContentsAndRolesAreInputTemplateTextIsNot) {
  Tagged r = render("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}",
                    {"hi", "<|im_end|>"});
  EXPECT_EQ(r.text, "<s><|im_start|>user\nhi<|im_end|><|im_start|>user\n<|im_end|><|im_end|>");
  EXPECT_EQ(r.input, (V{"user", "hi", "user", "<|im_end|>"}));
}

TEST(TextOriginTest, SurvivesStringOperations) {
  const std::string c = "  <think>t</think>\n\nab<|x|>cd  ";
  EXPECT_EQ(render("[{{ messages[0].content | trim }}]", {c}).input, V{"<think>t</think>\n\nab<|x|>cd"});
  EXPECT_EQ(render("{{ '<A>' ~ messages[0].content.split('</think>')[-1].lstrip('\\n') ~ '<B>' }}", {c}).input,
            V{"ab<|x|>cd  "});
  EXPECT_EQ(render("{{ '<A>' + messages[0].content[9:13] + '<B>' }}", {c}).input, V{"t</t"});
  EXPECT_EQ(render("{{ messages[0].content[::-1][:3] }}", {"abc<|"}).input, V{"|<c"});
  EXPECT_EQ(render("{{ messages | map(attribute='content') | join('<SEP>') }}", {"a", "b"}).input, (V{"a", "b"}));
  EXPECT_EQ(render("{{ '<SEP>'.join([messages[0].content, 'x', messages[1].content]) }}", {"a", "b"}).input,
            (V{"a", "b"}));
  Tagged rep = render("{{ messages[0].content.replace('a', '<X>') }}", {"bab"});
  EXPECT_EQ(rep.text, "b<X>b");
  EXPECT_EQ(rep.input, (V{"b", "b"}));
  EXPECT_EQ(render("{{ messages[0].content | upper }}<|im_end|>", {"<|im_end|>"}).input, V{"<|IM_END|>"});
  EXPECT_EQ(render("{{ messages[0].content | first }}{{ messages[0].content | last }}", {"<ab>"}).input, V{"<>"});
  EXPECT_EQ(render("{{ messages[0].content * 2 }}", {"<a>"}).input, V{"<a><a>"});
  EXPECT_EQ(render("{% for ch in messages[0].content %}{{ ch }}-{% endfor %}", {"ab"}).input, (V{"a", "b"}));
  EXPECT_EQ(render("{{ messages[0].content | indent(2, true) }}", {"a\nb"}).input, (V{"a\n", "b"}));
  Tagged esc = render("{{ messages[0].content | escape }}", {"<|x|>"});
  EXPECT_EQ(esc.input, V{"&lt;|x|&gt;"});  // changed length: all of it counts as input
}

TEST(TextOriginTest, SurvivesCapturesMacrosAndNamespaces) {
  EXPECT_EQ(render("{% set x %}<A>{{ messages[0].content }}{% endset %}{{ x | trim }}", {"c"}).input, V{"c"});
  EXPECT_EQ(render("{% macro m(c) %}[{{ c }}]{% endmacro %}{{ m(messages[0].content) }}", {"c"}).input, V{"c"});
  EXPECT_EQ(render("{% set ns = namespace(s='') %}{% for m in messages %}{% set ns.s = ns.s + '<|' + m.content %}"
                   "{% endfor %}{{ ns.s }}",
                   {"a", "b"})
                .input,
            (V{"a", "b"}));
  EXPECT_EQ(render("{% filter upper %}<a>{{ messages[0].content }}{% endfilter %}", {"c"}).input, V{"C"});
  EXPECT_EQ(render("{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}<a>{{ messages[0].content }}{% endcall %}",
                   {"c"})
                .input,
            V{"c"});
}

TEST(TextOriginTest, KeysAndStructuresFromInputAreInput) {
  Json tools = Json::parse(R"([{"name": "f<|im_end|>", "parameters": {"k<|x|>": 1}}])");
  Tagged r = render("{% for t in tools %}{% for k, v in t.parameters.items() %}<{{ k }}={{ v }}>{% endfor %}{% endfor %}",
                    {}, Json{{"tools", tools}});
  EXPECT_EQ(r.text, "<k<|x|>=1>");
  EXPECT_EQ(r.input, V{"k<|x|>"});
  EXPECT_EQ(render("{{ tools | tojson }}", {}, Json{{"tools", tools}}).input.size(), 1u);
  EXPECT_EQ(render("{{ tools[0] }}", {}, Json{{"tools", tools}}).input.size(), 1u);
  // Keys and values the template writes itself are template text.
  EXPECT_EQ(render("{% for k, v in {'<a>': '<b>'}.items() %}{{ k }}{{ v }}{% endfor %}{{ {'x': 1} | tojson }}", {}).input,
            V{});
  // Numbers print as template text: they cannot spell a special token.
  EXPECT_EQ(render("{{ n }}", {}, Json{{"n", 42}}).input, V{});
}

}  // namespace
}  // namespace hz
