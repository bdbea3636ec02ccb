#include "grammar/json_schema.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace hz::grammar {
namespace {

using json = nlohmann::ordered_json;

Grammar compile(const std::string& schema) {
  auto text = json_schema_to_grammar(json::parse(schema));
  EXPECT_TRUE(text.ok()) << text.status().message();
  auto g = Grammar::parse(*text);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << *text;
  return std::move(g).value();
}

void check(const std::string& schema, std::vector<std::string> accepted, std::vector<std::string> rejected) {
  Grammar g = compile(schema);
  for (const auto& s : accepted) EXPECT_TRUE(g.accepts(s)) << schema << " should accept " << s;
  for (const auto& s : rejected) EXPECT_FALSE(g.accepts(s)) << schema << " should reject " << s;
}

TEST(JsonSchemaTest, ObjectPropertiesRequiredAndAdditionalPropertiesFalse) {
  const std::string s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                            "required":["a","c"],"additionalProperties":false})";
  check(s, {R"({"a":1,"c":true})", R"({"a": 1, "b": "x", "c": false})", "{\n  \"a\": -3,\n  \"c\": true\n}"},
        {R"({"c":true})", R"({"a":1})", R"({"a":1,"c":true,"d":1})", R"({"a":"1","c":true})", R"({"c":true,"a":1})", "{}"});
}

TEST(JsonSchemaTest, AllOptionalProperties) {
  check(R"({"type":"object","properties":{"x":{"type":"null"},"y":{"type":"null"}}})",
        {"{}", R"({"x":null})", R"({"y":null})", R"({"x":null,"y":null})"}, {R"({,"y":null})", R"({"x":null,})"});
}

TEST(JsonSchemaTest, EnumAndConst) {
  check(R"({"enum":["red","green",3,null]})", {R"("red")", R"("green")", "3", "null"}, {R"("blue")", "4", "red"});
  check(R"({"const":{"k":[1,2]}})", {R"({"k":[1,2]})"}, {R"({"k":[1]})"});
}

TEST(JsonSchemaTest, ArraysWithItemsAndBounds) {
  check(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})", {"[1]", "[1,2]", "[1, 2, 3]"},
        {"[]", "[1,2,3,4]", "[\"a\"]", "[1,]"});
  check(R"({"type":"array","items":{"type":"boolean"}})", {"[]", "[true]", "[true,false,true,false]"}, {"[1]"});
  check(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"});
}

TEST(JsonSchemaTest, StringLengths) {
  check(R"({"type":"string","minLength":2,"maxLength":4})", {R"("ab")", R"("abcd")", R"("a\"")", R"("éé")"},
        {R"("a")", R"("abcde")", "\"a\nb\""});
  check(R"({"type":"string"})", {R"("")", R"("x\u00e9\n")"}, {R"("\x")", "\"a"});
}

TEST(JsonSchemaTest, IntegerMinimumMaximum) {
  Grammar g = compile(R"({"type":"integer","minimum":-15,"maximum":237})");
  for (int v = -40; v <= 300; ++v) EXPECT_EQ(g.accepts(std::to_string(v)), v >= -15 && v <= 237) << v;
  EXPECT_FALSE(g.accepts("007"));
  EXPECT_FALSE(g.accepts("-0"));
  Grammar lo = compile(R"({"type":"integer","minimum":18})");
  for (int v = -5; v <= 2000; ++v) EXPECT_EQ(lo.accepts(std::to_string(v)), v >= 18) << v;
  EXPECT_TRUE(lo.accepts("123456789012"));
  Grammar hi = compile(R"({"type":"integer","maximum":-7})");
  for (int v = -2000; v <= 50; ++v) EXPECT_EQ(hi.accepts(std::to_string(v)), v <= -7) << v;
}

TEST(JsonSchemaTest, NumberBooleanNull) {
  check(R"({"type":"number"})", {"0", "-1.5", "3e10", "2.25E-3"}, {"01", ".5", "1.", "+1", "NaN"});
  check(R"({"type":"boolean"})", {"true", "false"}, {"True", "1"});
  check(R"({"type":"null"})", {"null"}, {"nil"});
  check(R"({"type":["string","null"]})", {"null", R"("a")"}, {"1"});
}

TEST(JsonSchemaTest, AnyOf) {
  check(R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"z":{"type":"string"}},"required":["z"]}]})",
        {"12", R"({"z":"q"})"}, {R"({})", "true"});
}

TEST(JsonSchemaTest, DefsAndRecursiveRefs) {
  const std::string s = R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"],"additionalProperties":false}},
      "$ref":"#/$defs/node"})";
  check(s, {R"({"v":1,"kids":[]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]})"}, {R"({"v":1,"kids":[{}]})"});
}

TEST(JsonSchemaTest, JsonObjectGrammarAcceptsObjectsOnly) {
  auto g = Grammar::parse(json_object_grammar());
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(g->accepts(R"({"a":[1,{"b":null}],"c":"d"})"));
  EXPECT_TRUE(g->accepts("{}"));
  EXPECT_FALSE(g->accepts("[1]"));
  EXPECT_FALSE(g->accepts(R"({"a":})"));
}

TEST(JsonSchemaTest, RefusedKeywordsAreNamed) {
  struct Bad {
    const char* schema;
    const char* message_part;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"({"type":"string","pattern":"^a"})", "unsupported keyword 'pattern' at '/'"},
           {R"({"type":"object","properties":{"x":{"type":"string","format":"email"}}})", "'format' at '/properties/x'"},
           {R"({"oneOf":[{"type":"string"}]})", "unsupported keyword 'oneOf'"},
           {R"({"type":"number","minimum":1})", "'minimum' is not supported for type 'number'"},
           {R"({"type":"object","additionalProperties":true})", "additionalProperties"},
           {R"({"$ref":"#/$defs/missing"})", "names no definition"},
           {R"({"$ref":"http://x/y"})", "only local references"},
           {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "'b' is not in 'properties'"},
           {R"({"type":"date"})", "unsupported type 'date'"},
           {R"({"type":"string","maxLength":-1})", "'maxLength' must be between"},
       }) {
    auto r = json_schema_to_grammar(json::parse(b.schema));
    ASSERT_FALSE(r.ok()) << b.schema;
    EXPECT_NE(r.status().message().find(b.message_part), std::string::npos) << b.schema << " -> " << r.status().message();
  }
}

TEST(JsonSchemaTest, DeepSchemaIsRefused) {
  json s = {{"type", "string"}};
  for (int i = 0; i < 200; ++i) s = {{"type", "array"}, {"items", s}};
  auto r = json_schema_to_grammar(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nested deeper"), std::string::npos);
}

}  // namespace
}  // namespace hz::grammar
