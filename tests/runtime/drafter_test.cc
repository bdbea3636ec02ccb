#include "runtime/drafter.h"

#include <gtest/gtest.h>

#include <vector>

namespace hz {
namespace {

std::vector<int32_t> propose(const NgramDrafterOptions& o, const std::vector<int32_t>& tokens, int32_t max_tokens) {
  NgramDrafter d(o);
  std::vector<int32_t> draft = {99};  // cleared by propose()
  d.propose(tokens, max_tokens, &draft);
  return draft;
}

TEST(NgramDrafterTest, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  NgramDrafterOptions o;
  o.max_ngram = 2;
  o.min_ngram = 2;
  //                 [1 2] 3 4      [1 2] 5 6 7     [1 2]
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 1, 2, 5, 6, 7, 8, 1, 2};
  EXPECT_EQ(propose(o, t, 3), (std::vector<int32_t>{5, 6, 7}));  // the latest, not the first
  EXPECT_EQ(propose(o, t, 1), (std::vector<int32_t>{5}));
  EXPECT_EQ(propose(o, t, 0), (std::vector<int32_t>{}));
}

TEST(NgramDrafterTest, TriesTheLongestSuffixFirst) {
  NgramDrafterOptions o;
  o.max_ngram = 3;
  o.min_ngram = 1;
  // The 3-gram [4 1 2] occurs once, early; [1 2] occurs later with another continuation.
  const std::vector<int32_t> t = {4, 1, 2, 30, 31, 1, 2, 40, 41, 4, 1, 2};
  EXPECT_EQ(propose(o, t, 2), (std::vector<int32_t>{30, 31}));
  o.max_ngram = 2;
  EXPECT_EQ(propose(o, t, 2), (std::vector<int32_t>{40, 41}));
}

// A text repeated after other text (prompt P, continuation C, P again): the continuation of the
// longest agreement is C, though a shorter suffix recurs later with other followers.
TEST(NgramDrafterTest, TheLongestAgreementWinsOverALaterShortOne) {
  NgramDrafterOptions o;
  o.max_ngram = 8;
  o.min_ngram = 2;
  //                   P = 1 2 3 4 5 6    C = 7 8 9   ...  [5 6] 20 21   P again
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 6, 7, 8, 9, 5, 6, 20, 21, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(propose(o, t, 3), (std::vector<int32_t>{7, 8, 9}));
  o.max_ngram = 2;  // capped at 2, every candidate agrees on 2 tokens: the latest wins
  EXPECT_EQ(propose(o, t, 3), (std::vector<int32_t>{20, 21, 1}));
}

TEST(NgramDrafterTest, NothingWithoutAMatchOrBelowTheShortestSuffix) {
  NgramDrafterOptions o;
  o.max_ngram = 3;
  o.min_ngram = 2;
  EXPECT_TRUE(propose(o, {1, 2, 3, 4, 5, 6}, 4).empty());
  EXPECT_TRUE(propose(o, {5, 1, 7, 1}, 4).empty());  // only a 1-gram repeats
  o.min_ngram = 1;
  EXPECT_EQ(propose(o, {5, 1, 7, 1}, 4), (std::vector<int32_t>{7, 1}));  // the draft stops at the end
  EXPECT_TRUE(propose(o, {}, 4).empty());
  EXPECT_TRUE(propose(o, {3}, 4).empty());
}

TEST(NgramDrafterTest, PeriodicTextDraftsItsContinuation) {
  NgramDrafterOptions o;
  const std::vector<int32_t> t = {7, 8, 9, 7, 8, 9, 7, 8};
  EXPECT_EQ(propose(o, t, 4), (std::vector<int32_t>{9, 7, 8}));
}

TEST(NgramDrafterTest, SearchesOnlyTheWindow) {
  NgramDrafterOptions o;
  o.max_ngram = 2;
  o.min_ngram = 2;
  std::vector<int32_t> t = {1, 2, 3};
  for (int i = 0; i < 20; ++i) t.push_back(100 + i);
  t.push_back(1);
  t.push_back(2);
  EXPECT_EQ(propose(o, t, 1), (std::vector<int32_t>{3}));
  o.window = 10;
  EXPECT_TRUE(propose(o, t, 1).empty());
}

}  // namespace
}  // namespace hz
