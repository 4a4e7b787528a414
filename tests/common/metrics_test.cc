#include "common/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace lakecache::metrics {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(MetricsTest, CellsAreScrapedInTheTextFormat) {
  Registry registry;
  Counter c = registry.GetCounter("lakecache_test_things_total", "Things", {{"kind", "a"}});
  c.Add(3);
  EXPECT_EQ(registry.GetCounter("lakecache_test_things_total", "Things", {{"kind", "a"}}).Value(),
            3);  // the same cell
  registry.GetGauge("lakecache_test_level", "Level").Set(7.5);
  Histogram h = registry.GetHistogram("lakecache_test_seconds", "Durations", {{"op", "read"}});
  h.Observe(0.0002);
  h.Observe(2);
  registry.DeclareCounter("lakecache_test_errors_total", "Errors, none yet");
  std::string text = registry.Scrape();
  EXPECT_TRUE(Contains(text, "# TYPE lakecache_test_things_total counter")) << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_things_total{kind=\"a\"} 3")) << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_level 7.5")) << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_seconds_count{op=\"read\"} 2")) << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_seconds_bucket{op=\"read\",le=\"0.00025\"} 1"))
      << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_seconds_bucket{op=\"read\",le=\"+Inf\"} 2")) << text;
  EXPECT_TRUE(Contains(text, "# TYPE lakecache_test_errors_total counter")) << text;
}

TEST(MetricsTest, DefaultCellsRecordNothing) {
  Counter c;
  Histogram h;
  Gauge g;
  c.Add(5);
  h.Observe(1);
  g.Set(2);
  EXPECT_EQ(c.Value(), 0);
  EXPECT_FALSE(c);
  EXPECT_FALSE(h);
  { ScopedTimer timer(h); }
}

TEST(MetricsTest, CollectorsAreReadAtEveryScrapeUntilTheirRegistrationGoes) {
  Registry registry;
  int value = 1;
  Registry::Registration registration = registry.AddCollector([&value](Sink& sink) {
    sink.Counter("lakecache_test_reads_total", "Reads", {{"tier", "memory"}}, value);
    sink.Counter("lakecache_test_reads_total", "", {{"tier", "disk"}}, 2 * value);
    sink.Gauge("lakecache_test_used_bytes", "Used", {}, 100);
    sink.Histogram("lakecache_test_fetch_seconds", "Fetches", {}, {0.001, 0.01}, {1, 3}, 4, 0.5);
  });
  std::string text = registry.Scrape();
  EXPECT_TRUE(Contains(text, "lakecache_test_reads_total{tier=\"memory\"} 1")) << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_reads_total{tier=\"disk\"} 2")) << text;
  EXPECT_EQ(text.find("# TYPE lakecache_test_reads_total"),
            text.rfind("# TYPE lakecache_test_reads_total"))
      << "one family for both tiers: " << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_fetch_seconds_bucket{le=\"0.01\"} 3")) << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_fetch_seconds_bucket{le=\"+Inf\"} 4")) << text;
  EXPECT_TRUE(Contains(text, "lakecache_test_fetch_seconds_sum 0.5")) << text;
  value = 5;
  EXPECT_TRUE(Contains(registry.Scrape(), "lakecache_test_reads_total{tier=\"memory\"} 5"));
  registration.Reset();
  EXPECT_FALSE(Contains(registry.Scrape(), "lakecache_test_reads_total"));
}

}  // namespace
}  // namespace lakecache::metrics
