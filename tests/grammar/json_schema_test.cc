#include "grammar/json_schema.h"

#include <fmt/format.h>
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

// Exclusive and non-integer bounds of an integer become the inclusive integer bounds they imply.
TEST(JsonSchemaTest, IntegerExclusiveBounds) {
  Grammar positive = compile(R"({"type":"integer","exclusiveMinimum":0})");
  for (int v = -50; v <= 500; ++v) EXPECT_EQ(positive.accepts(std::to_string(v)), v > 0) << v;
  Grammar g = compile(R"({"type":"integer","exclusiveMinimum":-7.5,"exclusiveMaximum":10})");
  for (int v = -50; v <= 50; ++v) EXPECT_EQ(g.accepts(std::to_string(v)), v > -7.5 && v < 10) << v;
  Grammar h = compile(R"({"type":"integer","minimum":2.5,"exclusiveMaximum":10.5,"maximum":12})");
  for (int v = -50; v <= 50; ++v) EXPECT_EQ(h.accepts(std::to_string(v)), v >= 3 && v <= 10) << v;
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

// k / 20 in its shortest decimal form ("0.15", "-2", "0.05").
std::string number_text(int k) {
  std::string t = fmt::format("{}{}.{:02}", k < 0 ? "-" : "", std::abs(k) / 20, std::abs(k) % 20 * 5);
  while (t.back() == '0') t.pop_back();
  if (t.back() == '.') t.pop_back();
  return t == "-0" ? "0" : t;
}

TEST(JsonSchemaTest, NumberBounds) {
  struct Case {
    const char* schema;
    double lo, hi;
    bool lo_excl = false, hi_excl = false;  // exclusiveMinimum / exclusiveMaximum (pydantic's gt / lt)
  };
  for (const Case& c : std::vector<Case>{{R"({"type":"number","minimum":0,"maximum":1})", 0, 1},
                                        {R"({"type":"number","minimum":-5,"maximum":5})", -5, 5},
                                        {R"({"type":"number","minimum":-12,"maximum":-3})", -12, -3},
                                        {R"({"type":"number","minimum":3})", 3, 1e300},
                                        {R"({"type":"number","maximum":-3})", -1e300, -3},
                                        {R"({"type":"number","minimum":-2})", -2, 1e300},
                                        {R"({"type":"number","exclusiveMinimum":0})", 0, 1e300, true},
                                        {R"({"type":"number","exclusiveMaximum":0})", -1e300, 0, false, true},
                                        {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})", 0, 1, true, true},
                                        {R"({"type":"number","minimum":-5,"exclusiveMaximum":5})", -5, 5, false, true},
                                        {R"({"type":"number","exclusiveMinimum":-12,"maximum":-3})", -12, -3, true},
                                        {R"({"type":"number","exclusiveMinimum":-3,"exclusiveMaximum":-1})", -3, -1, true, true},
                                        {R"({"type":"number","exclusiveMinimum":-2})", -2, 1e300, true},
                                        {R"({"type":"number","exclusiveMaximum":4})", -1e300, 4, false, true},
                                        // Both forms: the stricter of each pair.
                                        {R"({"type":"number","minimum":0,"exclusiveMinimum":0,"maximum":2,"exclusiveMaximum":3})",
                                         0, 2, true, false},
                                        {R"({"type":"number","minimum":1,"exclusiveMinimum":0})", 1, 1e300}}) {
    Grammar g = compile(c.schema);
    int accepted = 0;
    for (int k = -600; k <= 600; ++k) {
      const double v = k * 0.05;
      const std::string t = number_text(k);
      const bool in = (c.lo_excl ? v > c.lo : v >= c.lo) && (c.hi_excl ? v < c.hi : v <= c.hi);
      // Every value written is in range; every value in range is written in its shortest form.
      EXPECT_EQ(g.accepts(t), in) << c.schema << " " << t;
      accepted += in;
    }
    EXPECT_GT(accepted, 0) << c.schema;
    EXPECT_FALSE(g.accepts("1e2")) << c.schema;  // no exponent: it could leave the range
  }
  Grammar positive = compile(R"({"type":"number","exclusiveMinimum":0})");
  for (const char* ok : {"0.5", "0.0001", "0.10", "1", "1.0", "12.25"}) EXPECT_TRUE(positive.accepts(ok)) << ok;
  for (const char* bad : {"0", "0.0", "0.000", "-0.5", "-0"}) EXPECT_FALSE(positive.accepts(bad)) << bad;
  Grammar unit = compile(R"({"type":"number","minimum":0,"maximum":1})");
  for (const char* ok : {"0", "1", "0.5", "0.0001", "0.9999999"}) EXPECT_TRUE(unit.accepts(ok)) << ok;
  for (const char* bad : {"1.5", "-0.1", "2", "01", "1.0001", "-1"}) EXPECT_FALSE(unit.accepts(bad)) << bad;
}

TEST(JsonSchemaTest, StringFormats) {
  check(R"({"type":"string","format":"date"})", {R"("2024-02-29")", R"("1999-12-31")"},
        {R"("2024-13-01")", R"("24-01-01")", R"("2024-1-01")", R"("2024-01-32")"});
  check(R"({"type":"string","format":"date-time"})",
        {R"("2024-01-02T03:04:05Z")", R"("2024-01-02T23:59:59.123+02:00")", R"("2024-01-02T00:00:00-11:30")"},
        {R"("2024-01-02T03:04:05")", R"("2024-01-02 03:04:05Z")", R"("2024-01-02T24:00:00Z")"});
  check(R"({"type":"string","format":"time"})", {R"("12:30:00Z")"}, {R"("12:30Z")"});
  check(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
        {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
  check(R"({"type":"string","format":"email"})", {R"("a.b+c@example.co.uk")"}, {R"("ab@example")", R"("@x.org")", R"("a b@x.org")"});
  check(R"({"type":"string","format":"ipv4"})", {R"("192.168.0.1")", R"("0.0.0.0")", R"("255.255.255.255")"},
        {R"("256.1.1.1")", R"("1.2.3")", R"("01.2.3.4")"});
}

TEST(JsonSchemaTest, Patterns) {
  check(R"j({"type":"string","pattern":"^[A-Z]{3}-\\d{2,4}$"})j", {R"j("ABC-12")j", R"j("XYZ-1234")j"},
        {R"("AB-12")", R"("abc-12")", R"("ABC-12345")", R"("ABC-1")", R"(" ABC-12")"});
  // Unanchored: the match may sit anywhere.
  check(R"j({"type":"string","pattern":"abc"})j", {R"j("abc")j", R"j("xxabcyy")j", R"j("\"abc\\")j"}, {R"j("ab")j", R"j("")j"});
  check(R"j({"type":"string","pattern":"^(cat|dog)s?$"})j", {R"j("cat")j", R"j("dogs")j"}, {R"j("cats!")j", R"j("bird")j", R"j("")j"});
  check(R"j({"type":"string","pattern":"^a.c$"})j", {R"j("abc")j", R"j("a c")j", R"j("a\u00e9c")j"}, {R"j("ac")j", R"j("abbc")j"});
  // '"' and '\' in a class are their JSON escapes; a negated class takes non-ASCII characters.
  check(R"j({"type":"string","pattern":"^[\"a]+$"})j", {R"j("a\"a")j", R"j("\"")j"}, {R"j("b")j", R"j("a"a")j"});
  check(R"j({"type":"string","pattern":"^[^,]+$"})j", {"\"\xC3\xA9t\xC3\xA9\"", R"j("a\"b")j"}, {R"j("a,b")j", R"j("")j"});
  check(R"j({"type":"string","pattern":"^\\w+@\\w+\\.com$"})j", {R"j("bob@mail.com")j"}, {R"j("bob@mail.org")j", R"j("b b@mail.com")j"});
  check(R"j({"type":"string","pattern":"^(?:\\d{3}\\.){2}\\d{3}$"})j", {R"j("123.456.789")j"}, {R"j("123.456.78")j", R"j("123-456-789")j"});
  check(R"j({"type":"string","pattern":"^[a-c-]*$"})j", {R"j("a-b-c")j", R"j("")j"}, {R"j("d")j"});
  // A non-ASCII character is one atom: the quantifier repeats the whole character.
  check("{\"type\":\"string\",\"pattern\":\"^\xC3\xA9+\xF0\x9F\x98\x80$\"}", {"\"\xC3\xA9\xC3\xA9\xF0\x9F\x98\x80\""},
        {"\"\xC3\xA9\xC3\"", "\"\xF0\x9F\x98\x80\""});
}

TEST(JsonSchemaTest, RefusedKeywordsAreNamed) {
  struct Bad {
    const char* schema;
    const char* message_part;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"j({"type":"string","pattern":"^(?=a)"})j", "lookarounds"},
           {R"j({"type":"string","pattern":"a{3"})j", "'{' without '}'"},
           {R"j({"type":"string","pattern":"(ab"})j", "'(' without ')'"},
           {R"j({"type":"string","pattern":"a^b"})j", "only at the ends"},
           {R"j({"type":"string","pattern":"\\bword"})j", "the escape '\\b'"},
           {R"({"type":"object","properties":{"x":{"type":"string","format":"hostname"}}})", "format 'hostname' is not supported"},
           {R"({"type":"string","format":"date","maxLength":3})", "give one of"},
           {R"({"oneOf":[{"type":"string"}]})", "unsupported keyword 'oneOf'"},
           {R"({"type":"number","minimum":0.5})", "a 'minimum' of 0.5 on a number is not supported"},
           {R"({"type":"number","exclusiveMinimum":0.5})", "a 'exclusiveMinimum' of 0.5 on a number"},
           {R"({"type":"number","minimum":0,"exclusiveMinimum":true})", "a boolean 'exclusiveMinimum' (draft 4)"},
           {R"({"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":4})", "the upper bound is below the lower one"},
           {R"({"type":"number","exclusiveMinimum":0,"maximum":0})", "the upper bound is below the lower one"},
           {R"({"type":"string","exclusiveMinimum":0})", "'exclusiveMinimum' is not supported for type 'string'"},
           {R"j({"type":"number","pattern":"a"})j", "'pattern' is not supported for type 'number'"},
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
