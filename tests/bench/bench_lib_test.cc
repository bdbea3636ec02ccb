// src/bench building blocks: statistics, the SVG plot, URL parsing, synthetic KV fill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/thread_pool.h"
#include "bench/http_client.h"
#include "bench/stats.h"
#include "bench/svg_plot.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/test_support.h"

namespace hz::bench {
namespace {

TEST(BenchStatsTest, SummaryAndPercentiles) {
  Summary s = summarize({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(summarize({4, 1}).median, 2.5);
  EXPECT_EQ(summarize({}).count, 0);
  // numpy.percentile([1..10], [50, 95, 99]) = 5.5, 9.55, 9.91
  std::vector<double> v = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 5.5);
  EXPECT_NEAR(percentile(v, 95), 9.55, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(BenchSvgTest, PlotHasSeriesLegendAndEscapedText) {
  PlotSpec p;
  p.title = "a < b & c";
  p.x_label = "depth";
  p.y_label = "tokens/s";
  p.series.push_back({"decode", {{0, 100}, {8192, 60}, {32768, 20}}});
  p.series.push_back({"prefill", {{512, 300}}});
  std::string svg = render_svg(p);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  EXPECT_EQ(svg.find("a < b"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find(">decode</text>"), std::string::npos);
  EXPECT_NE(svg.find(">prefill</text>"), std::string::npos);
  EXPECT_NE(svg.find(">10K</text>"), std::string::npos);  // x tick labels in K
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // No data at all still gives a valid document.
  EXPECT_NE(render_svg(PlotSpec{}).find("</svg>"), std::string::npos);
}

// The x of every <circle cx="..."> of an SVG.
std::vector<double> circle_xs(const std::string& svg) {
  std::vector<double> xs;
  for (size_t p = svg.find("<circle cx=\""); p != std::string::npos; p = svg.find("<circle cx=\"", p + 1))
    xs.push_back(std::stod(svg.substr(p + 12)));
  return xs;
}

TEST(BenchSvgTest, PointsStayInsideTheFrameAlsoALonePoint) {
  // The frame spans x 80..580 (width 760, margins 80 and 180).
  for (const PlotSeries& s : {PlotSeries{"one", {{512, 100}}}, PlotSeries{"two", {{0, 5}, {4096, 7}}}}) {
    PlotSpec p;
    p.series = {s};
    const std::vector<double> xs = circle_xs(render_svg(p));
    ASSERT_EQ(xs.size(), s.points.size());
    for (double x : xs) {
      EXPECT_GT(x, 80.5) << s.name;
      EXPECT_LT(x, 579.5) << s.name;
    }
  }
}

TEST(BenchSvgTest, PanelsStackUnderOneTitle) {
  PlotSpec prefill{"prefill", "", "prompt tokens", "tokens/s", {{"prefill", {{128, 900}, {512, 1000}}}}};
  PlotSpec decode{"decode", "", "depth", "tokens/s", {{"decode", {{0, 40}}}}};
  const std::string svg = render_svg("horizon bench engine: model.gguf", {prefill, decode});
  EXPECT_NE(svg.find("height=\"960\""), std::string::npos);  // 40 + 2 x 460
  EXPECT_NE(svg.find(">horizon bench engine: model.gguf</text>"), std::string::npos);
  EXPECT_NE(svg.find(">prefill</text>"), std::string::npos);
  EXPECT_NE(svg.find(">decode</text>"), std::string::npos);
  EXPECT_EQ(circle_xs(svg).size(), 3u);
  EXPECT_EQ(svg.find("<svg", 1), std::string::npos);  // one document
}

TEST(BenchHttpTest, ParsesUrlsAndNamesTheFlagOnErrors) {
  auto u = parse_http_url("http://127.0.0.1:8080", "--url");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8080");
  EXPECT_EQ(u->base_path, "");
  u = parse_http_url("http://localhost/api/", "--url");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->base_path, "/api");
  for (const char* bad : {"https://x:1", "127.0.0.1:8080", "http://:80", "http://h:99999", "http://h:8a"}) {
    auto r = parse_http_url(bad, "--url");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--url"), std::string::npos) << r.status().message();
  }
}

TEST(SyntheticFillTest, FillsDeterministicallyThenDecodes) {
  auto model = Model::load(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  ThreadPool pool(2);
  SingleSequenceOptions so;
  so.max_tokens = 128;
  SingleSequence a(**model, pool, so), b(**model, pool, so);
  ASSERT_TRUE(a.fill_synthetic(100, 7).ok());
  EXPECT_EQ(a.num_tokens(), 100);
  ASSERT_TRUE(b.fill_synthetic(60, 7).ok());
  ASSERT_TRUE(b.fill_synthetic(40, 7).ok());  // in two steps: the same content (keyed by position)
  const auto& kv = a.kv();
  const uint64_t total = kv.total_bytes();
  EXPECT_EQ(std::memcmp(a.kv().exact_plane(0, 0, 0), b.kv().exact_plane(0, 0, 0), total), 0);
  // Values are written (100 positions of every layer and head), finite and in [-1, 1].
  std::vector<float> all(total / 2);
  kernels::f16_to_f32_row(reinterpret_cast<const uint16_t*>(a.kv().exact_plane(0, 0, 0)), all.data(),
                          static_cast<int64_t>(all.size()));
  int64_t nonzero = 0;
  for (float v : all) {
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_LE(std::fabs(v), 1.0f);
    nonzero += v != 0;
  }
  const auto& c = kv.config();
  EXPECT_GT(nonzero, int64_t{100} * c.num_layers * 2 * c.num_kv_heads * c.head_dim * 99 / 100);
  // Decoding on top works and gives finite logits; truncate goes back to the depth.
  const auto& logits = a.append({1});
  EXPECT_EQ(a.num_tokens(), 101);
  for (float l : logits) ASSERT_TRUE(std::isfinite(l));
  ASSERT_TRUE(a.truncate(100).ok());
  EXPECT_EQ(a.num_tokens(), 100);
  ASSERT_TRUE(a.truncate(10).ok());
  EXPECT_EQ(a.num_tokens(), 10);
  // Beyond the capacity: an error naming the sizes, not a crash.
  auto s = a.fill_synthetic(1000);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("capacity"), std::string::npos);
  EXPECT_EQ(a.num_tokens(), 10);
}

// Truncation on compact and mixed-precision caches: back to a depth whose blocks still have their
// exact copies, decoding on gives bit-identical logits to a run that never went further (a block
// completed, sealed and then truncated into is re-encoded when it completes again); once the cache
// finalized a block the next query reads exactly or hot, truncation refuses and changes nothing.
TEST(SyntheticFillTest, TruncateOnCompactCachesIsExactOrRefused) {
  auto model = Model::load(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  ThreadPool pool(1);
  auto tokens = [](int32_t n, int32_t salt) {
    std::vector<int32_t> t;
    for (int32_t i = 0; i < n; ++i) t.push_back(1 + (i * 37 + salt * 101) % 500);
    return t;
  };
  // int8: the junk stays inside block 2 (32..47), still staged. Hot window 48 + int4: the junk
  // completes block 2 (sealed into the arena), which stays hot and staged; the continuation
  // re-completes it and goes on until block 2 is read cold, from the arena.
  struct Case {
    KvPrecision p;
    int32_t junk;
  };
  for (Case k : {Case{KvPrecision{KvType::kInt8, 0, KvType::kInt8}, 2}, Case{KvPrecision{KvType::kF16, 48, KvType::kInt4}, 6}}) {
    SCOPED_TRACE(kv_precision_name(k.p));
    SingleSequenceOptions so;
    so.max_tokens = 128;
    so.kv_precision = k.p;
    SingleSequence ref(**model, pool, so), a(**model, pool, so);
    ref.append(tokens(45, 1));
    const std::vector<float> want = ref.append(tokens(60, 2));
    a.append(tokens(45, 1));
    a.append(tokens(k.junk, 3));
    ASSERT_TRUE(a.truncate(45).ok());
    EXPECT_EQ(a.append(tokens(60, 2)), want);
    // Far past block 2 and the window: truncating back into it is refused.
    const int64_t before = a.num_tokens();
    Status s = a.truncate(45);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("finalized"), std::string::npos) << s.message();
    EXPECT_EQ(a.num_tokens(), before);
  }
}

}  // namespace
}  // namespace hz::bench
