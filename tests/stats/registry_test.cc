// stats::Registry and stats::Snapshot: registration once, families in first-use order, labelled
// series, histograms, and updates from several threads while a reader collects.
#include "stats/registry.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hz::stats {
namespace {

int64_t int_value(const Series& s) { return std::get<int64_t>(s.value); }

TEST(SnapshotTest, FamiliesKeepFirstUseOrderAndFirstNonEmptyHelp) {
  Snapshot snap;
  snap.add("b_total", "", Kind::kCounter, {{"tier", "ram"}}, int64_t{1});
  snap.add("a", "gauge a", Kind::kGauge, {}, 2.5);
  snap.add("b_total", "counter b", Kind::kCounter, {{"tier", "disk"}}, int64_t{3});
  ASSERT_EQ(snap.families().size(), 2u);
  EXPECT_EQ(snap.families()[0].name, "b_total");
  EXPECT_EQ(snap.families()[0].help, "counter b");
  ASSERT_EQ(snap.families()[0].series.size(), 2u);
  EXPECT_EQ(snap.families()[0].series[1].labels, (Labels{{"tier", "disk"}}));
  EXPECT_EQ(int_value(snap.families()[0].series[1]), 3);
  ASSERT_NE(snap.find("a"), nullptr);
  EXPECT_DOUBLE_EQ(std::get<double>(snap.find("a")->series[0].value), 2.5);
  EXPECT_EQ(snap.find("c"), nullptr);
}

TEST(SnapshotTest, ValueOfKeepsIntegersIntegral) {
  EXPECT_TRUE(std::holds_alternative<int64_t>(value_of(uint64_t{7})));
  EXPECT_TRUE(std::holds_alternative<int64_t>(value_of(true)));
  EXPECT_TRUE(std::holds_alternative<double>(value_of(0.5f)));
}

TEST(SnapshotTest, LabelAllPutsAConstantLabelFirstOnEverySeries) {
  Snapshot s;
  s.add("a", "h", Kind::kGauge, {}, int64_t{1});
  s.add("b", "h", Kind::kCounter, {{"tier", "ram"}}, int64_t{2});
  s.family("empty", "h", Kind::kCounter);  // no series: stays empty
  s.label_all("model_name", "m");
  EXPECT_EQ(s.find("a")->series[0].labels, (Labels{{"model_name", "m"}}));
  EXPECT_EQ(s.find("b")->series[0].labels, (Labels{{"model_name", "m"}, {"tier", "ram"}}));
  EXPECT_TRUE(s.find("empty")->series.empty());
}

TEST(RegistryTest, CollectsEveryKindInRegistrationOrder) {
  Registry r;
  Counter& c = r.counter("x_total", "x help");
  Gauge& g = r.gauge("y", "y help", {{"tier", "far"}});
  Histogram& h = r.histogram("z_seconds", "z help", {0.1, 1.0});
  LabeledCounter& l = r.labeled_counter("w_total", "w help", "status");
  c.inc(2);
  g.set(-4);
  h.observe(0.05);
  h.observe(5, 3);
  l.inc("500");
  l.inc("200", 2);
  Snapshot snap;
  r.collect(snap);
  ASSERT_EQ(snap.families().size(), 4u);
  EXPECT_EQ(snap.families()[0].kind, Kind::kCounter);
  EXPECT_EQ(int_value(snap.families()[0].series[0]), 2);
  EXPECT_EQ(snap.families()[1].series[0].labels, (Labels{{"tier", "far"}}));
  EXPECT_EQ(int_value(snap.families()[1].series[0]), -4);
  const HistogramData& hd = snap.families()[2].series[0].histogram;
  EXPECT_EQ(hd.counts, (std::vector<uint64_t>{1, 0, 3}));
  EXPECT_EQ(hd.count, 4u);
  EXPECT_DOUBLE_EQ(hd.sum, 15.05);
  const Family& w = snap.families()[3];
  ASSERT_EQ(w.series.size(), 2u);  // sorted by label value
  EXPECT_EQ(w.series[0].labels, (Labels{{"status", "200"}}));
  EXPECT_EQ(int_value(w.series[0]), 2);
}

TEST(RegistryTest, UntouchedLabeledCounterIsAnEmptyFamily) {
  Registry r;
  r.labeled_counter("w_total", "w help", "status");
  Snapshot snap;
  r.collect(snap);
  ASSERT_NE(snap.find("w_total"), nullptr);
  EXPECT_TRUE(snap.find("w_total")->series.empty());
}

TEST(RegistryTest, WritersAndACollectorRunTogether) {
  Registry r;
  Counter& c = r.counter("c_total", "");
  Histogram& h = r.histogram("h", "", {1.0});
  LabeledCounter& l = r.labeled_counter("l_total", "", "k");
  constexpr int kThreads = 4, kIters = 20000;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        c.inc();
        h.observe(0.5);
        l.inc(t % 2 == 0 ? "even" : "odd");
      }
    });
  }
  uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {  // counters never go backwards while collected
    Snapshot snap;
    r.collect(snap);
    const uint64_t now = static_cast<uint64_t>(int_value(snap.find("c_total")->series[0]));
    EXPECT_GE(now, last);
    last = now;
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(c.value(), uint64_t{kThreads} * kIters);
  EXPECT_EQ(h.count(), uint64_t{kThreads} * kIters);
  EXPECT_EQ(l.values().at("even"), uint64_t{kThreads / 2} * kIters);
}

}  // namespace
}  // namespace hz::stats
