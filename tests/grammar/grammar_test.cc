#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hz::grammar {
namespace {

Grammar must_parse(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(g).value();
}

struct Case {
  const char* grammar;
  std::vector<const char*> accepted;
  std::vector<const char*> rejected;
};

void check(const Case& c) {
  Grammar g = must_parse(c.grammar);
  for (const char* s : c.accepted) EXPECT_TRUE(g.accepts(s)) << c.grammar << " should accept '" << s << "'";
  for (const char* s : c.rejected) EXPECT_FALSE(g.accepts(s)) << c.grammar << " should reject '" << s << "'";
}

TEST(GrammarTest, Literal) { check({R"g(root ::= "abc")g", {"abc"}, {"", "ab", "abcd", "abd"}}); }

TEST(GrammarTest, LiteralEscapesAndUnicode) {
  check({R"g(root ::= "a\n\t\"\\\x41\u00e9é")g", {"a\n\t\"\\A\xC3\xA9\xC3\xA9"}, {"a\n\t\"\\A", "a\\n"}});
}

TEST(GrammarTest, Alternation) { check({R"g(root ::= "cat" | "dog" | "")g", {"cat", "dog", ""}, {"cow", "catdog"}}); }

TEST(GrammarTest, SequenceAndRuleReference) {
  check({"root ::= greet \" \" name\ngreet ::= \"hi\" | \"yo\"\nname ::= \"bob\"", {"hi bob", "yo bob"}, {"hibob", "hi al"}});
}

TEST(GrammarTest, Groups) { check({R"g(root ::= "a" ("b" | "c") "d")g", {"abd", "acd"}, {"ad", "abcd"}}); }

TEST(GrammarTest, Star) { check({R"g(root ::= "a" "b"* "c")g", {"ac", "abc", "abbbbc"}, {"a", "abbb", "abac"}}); }

TEST(GrammarTest, Plus) { check({R"g(root ::= ("ab")+)g", {"ab", "abab"}, {"", "aba", "ba"}}); }

TEST(GrammarTest, Optional) { check({R"g(root ::= "x" "y"? "z")g", {"xz", "xyz"}, {"xyyz", "xy"}}); }

TEST(GrammarTest, BoundedRepetition) {
  check({R"g(root ::= [0-9]{2,4})g", {"12", "123", "1234"}, {"1", "12345", "1a"}});
  check({R"g(root ::= "a"{3})g", {"aaa"}, {"aa", "aaaa"}});
  check({R"g(root ::= "a"{2,})g", {"aa", "aaaaaaa"}, {"a", ""}});
  check({R"g(root ::= "a"{0,1} "b")g", {"b", "ab"}, {"aab"}});
}

TEST(GrammarTest, CharacterClasses) {
  check({R"g(root ::= [a-cx]+)g", {"abcx", "x"}, {"d", "", "abd"}});
  check({R"g(root ::= [^"\\]+)g", {"hello world", "é☃😀"}, {"a\"", "\\"}});
  check({R"g(root ::= [\]\-\\])g", {"]", "-", "\\"}, {"a"}});
  check({R"g(root ::= [α-ω])g", {"β"}, {"a", "Ω"}});
}

TEST(GrammarTest, NegatedClassCoversAllUtf8Lengths) {
  Grammar g = must_parse(R"g(root ::= [^a])g");
  for (const char* s : {"b", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF",
                        "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF"})
    EXPECT_TRUE(g.accepts(s)) << s;
  // Surrogates, overlong forms and bytes past U+10FFFF are not characters.
  for (const char* s : {"a", "\xED\xA0\x80", "\xC0\xAF", "\xE0\x80\xAF", "\xF4\x90\x80\x80", "\xFF"}) EXPECT_FALSE(g.accepts(s));
}

TEST(GrammarTest, AnyCharacter) { check({R"g(root ::= "<" . ">")g", {"<a>", "<é>", "<>>"}, {"<>", "<ab>"}}); }

TEST(GrammarTest, CommentsAndMultilineRules) {
  check({"# a comment\nroot ::= item\n  (\",\" item)*   # trailing\nitem ::=\n  \"x\" |\n  \"y\"\n", {"x", "x,y,x"}, {"x,", ",x"}});
}

TEST(GrammarTest, RecursionNests) {
  Grammar g = must_parse(R"g(root ::= "(" root ")" | "")g");
  EXPECT_TRUE(g.accepts("((()))"));
  EXPECT_FALSE(g.accepts("(()"));
}

TEST(GrammarTest, NestingBeyondTheStackLimitIsRejectedNotCrashed) {
  Grammar g = must_parse(R"g(root ::= "(" root ")" | "")g");
  const size_t n = Grammar::kMaxStackDepth + 10;
  EXPECT_FALSE(g.accepts(std::string(n, '(') + std::string(n, ')')));
}

TEST(GrammarTest, TailRecursionDoesNotGrowTheStack) {
  Grammar g = must_parse(R"g(root ::= "a"*)g");
  EXPECT_TRUE(g.accepts(std::string(10 * Grammar::kMaxStackDepth, 'a')));
}

TEST(GrammarTest, AmbiguityCostsABoundedAmountOfWorkPerByte) {
  // 500 alternatives that all match "a": every byte re-expands each of ~500 stacks (~250,000 steps
  // without the budget), and each expansion alone yields the whole next set.
  std::string text = "root ::= x*\nx ::= \"a\"";
  for (int i = 0; i < 499; ++i) text += " | \"a\"";
  Grammar g = must_parse(text);
  constexpr size_t kBound = 150000;
  static_assert(Grammar::kMaxAdvanceSteps + Grammar::kMaxExpandSteps <= kBound);
  StackSet cur, next;
  std::vector<uint32_t> scratch;
  g.initial(&cur);
  for (int i = 0; i < 8; ++i) {
    const size_t steps = g.advance(cur, 'a', &next, &scratch);
    EXPECT_LE(steps, kBound);
    EXPECT_LE(next.size(), Grammar::kMaxStacks);
    ASSERT_FALSE(next.empty());
    std::swap(cur, next);
  }
  EXPECT_TRUE(g.accepts(std::string(64, 'a')));
  EXPECT_FALSE(g.accepts("aab"));
}

TEST(StackSetTest, KeepsEachDistinctStackOnce) {
  StackSet s;
  for (int rep = 0; rep < 3; ++rep) {
    for (uint32_t i = 0; i < 200; ++i) {
      const uint32_t one[] = {i};
      const uint32_t two[] = {7, i};  // shares its first element with {7}
      s.add(one, one + 1);
      s.add(two, two + 2);
    }
  }
  EXPECT_EQ(s.size(), 400u);
  EXPECT_FALSE(s.has_empty_stack());
  s.add(nullptr, nullptr);
  s.add(nullptr, nullptr);
  EXPECT_EQ(s.size(), 401u);
  EXPECT_TRUE(s.has_empty_stack());
  for (uint32_t i = 0; i < 200; ++i) {
    const uint32_t three[] = {1, 2, i};
    s.add(three, three + 3);
  }
  EXPECT_EQ(s.size(), Grammar::kMaxStacks);
  s.clear();
  EXPECT_TRUE(s.empty());
  const uint32_t one[] = {3};
  s.add(one, one + 1);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(*s.stack_begin(0), 3u);
}

TEST(GrammarTest, ErrorsNameTheProblem) {
  struct Bad {
    const char* text;
    const char* message_part;
  };
  for (const Bad& b : std::vector<Bad>{
           {"rot ::= \"a\"", "no rule named 'root'"},
           {"root ::= x", "'x' is used but not defined"},
           {"root ::= \"a", "unterminated string"},
           {"root ::= [a-", "unterminated character class"},
           {"root ::= [z-a]", "reversed"},
           {"root ::= (\"a\"", "expected ')'"},
           {"root ::= \"a\"{3,1}", "smaller"},
           {"root ::= \"a\"{99999999}", "limit"},
           {"root ::= root \"a\" | \"b\"", "left-recursive"},
           {"root ::= (\"a\"?)*", "left-recursive"},
           {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
           {"root ::= \"\\q\"", "unknown escape"},
           {"root ::= @", "line 1 column 10"},
       }) {
    auto g = Grammar::parse(b.text);
    ASSERT_FALSE(g.ok()) << b.text;
    EXPECT_NE(g.status().message().find(b.message_part), std::string::npos) << b.text << " -> " << g.status().message();
  }
}

TEST(GrammarTest, DeepGroupsAreRefused) {
  auto g = Grammar::parse("root ::= " + std::string(1000, '(') + "\"a\"" + std::string(1000, ')'));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested too deeply"), std::string::npos);
}

TEST(GrammarTest, ElementBudgetIsEnforced) {
  GrammarLimits lim;
  lim.max_elements = 1000;
  auto g = Grammar::parse(R"g(root ::= ("abcdefghij"{100}){100})g", lim);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("more than 1000 elements"), std::string::npos);
}

}  // namespace
}  // namespace hz::grammar
