// The agent's text format against prometheus-cpp's TextSerializer (Debian's), byte for byte, on
// every metric type, escapes and numbers of every magnitude; and its gzip read back by zlib.
#include "exporter/text_format.h"

#include <prometheus/text_serializer.h>
#include <zlib.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace polyaccel::exporter {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::string prometheus_cpp(const std::vector<MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

ClientMetric metric(std::vector<ClientMetric::Label> labels) {
  ClientMetric m;
  m.label = std::move(labels);
  return m;
}

TEST(TextFormat, EveryTypeAndEscapeAsPrometheusCpp) {
  std::vector<MetricFamily> f;
  MetricFamily counter{"polyaccel_c_total", "A counter.", MetricType::Counter, {}};
  auto c = metric({{"gpu", "0"}, {"path", "C:\\dir \"quoted\"\nnext"}, {"empty", ""}});
  c.counter.value = 12345;
  counter.metric.push_back(c);
  auto unlabelled = metric({});
  unlabelled.counter.value = 0.5;
  unlabelled.timestamp_ms = 1733100000123;
  counter.metric.push_back(unlabelled);
  f.push_back(counter);

  MetricFamily gauge{"DCGM_FI_DEV_GPU_TEMP", "", MetricType::Gauge, {}};
  auto g = metric({{"modelName", "NVIDIA H100 80GB HBM3"}, {"utf8", "\xc3\xa9t\xc3\xa9"}});
  g.gauge.value = -0.0;
  gauge.metric.push_back(g);
  g.gauge.value = std::numeric_limits<double>::quiet_NaN();
  gauge.metric.push_back(g);
  g.gauge.value = std::numeric_limits<double>::infinity();
  gauge.metric.push_back(g);
  g.gauge.value = -std::numeric_limits<double>::infinity();
  gauge.metric.push_back(g);
  f.push_back(gauge);

  MetricFamily untyped{"u", "Untyped.", MetricType::Untyped, {}};
  auto u = metric({{"a", "\\\\\n\n\"\""}});
  u.untyped.value = 1e300;
  untyped.metric.push_back(u);
  f.push_back(untyped);

  MetricFamily summary{"s", "A summary.", MetricType::Summary, {}};
  auto s = metric({{"x", "y"}});
  s.summary.sample_count = std::numeric_limits<std::uint64_t>::max();
  s.summary.sample_sum = 3.25;
  s.summary.quantile = {{0.5, 1}, {0.9, 2.5}, {0.99, std::nan("")}};
  summary.metric.push_back(s);
  summary.metric.push_back(metric({}));
  f.push_back(summary);

  MetricFamily histogram{"h", "Histogram.", MetricType::Histogram, {}};
  auto h = metric({{"le_not", "1"}});
  h.histogram.sample_count = 7;
  h.histogram.sample_sum = 0.125;
  h.histogram.bucket = {{1, 0.005}, {3, 0.1}, {7, 10}};  // no +Inf bucket: one is added
  histogram.metric.push_back(h);
  h.histogram.bucket.push_back({7, std::numeric_limits<double>::infinity()});
  histogram.metric.push_back(h);
  h.timestamp_ms = -5;
  histogram.metric.push_back(h);
  f.push_back(histogram);

  f.push_back(MetricFamily{"no_series", "Help only.", MetricType::Gauge, {}});
  EXPECT_EQ(text_format(f), prometheus_cpp(f));
  EXPECT_EQ(text_format({}), "");
}

// Doubles of every magnitude and precision: integers, ratios, values past 2^53, subnormals,
// random bit patterns. Each written as prometheus-cpp writes it (%.16g).
TEST(TextFormat, NumbersOfEveryMagnitudeAsPrometheusCpp) {
  std::vector<double> values = {0,
                                1,
                                -1,
                                0.1,
                                652.34,
                                699.81,
                                0.6325,
                                9663676416,
                                1e16,
                                9007199254740993.0,
                                1e-5,
                                123456789012345678.0,
                                5e-324,
                                2.2250738585072014e-308,
                                1.7976931348623157e308,
                                0.30000000000000004,
                                1.0 / 3,
                                2.0 / 3,
                                100,
                                1e21,
                                1e-7};
  std::mt19937_64 random(20261202);
  for (int i = 0; i < 20000; ++i) {
    double d = std::bit_cast<double>(random());
    if (std::isfinite(d)) values.push_back(d);
    values.push_back(static_cast<double>(random() % 100000000) / 1000);
  }
  MetricFamily family{"v", "", MetricType::Gauge, {}};
  for (double v : values) {
    auto m = metric({{"i", std::to_string(family.metric.size())}});
    m.gauge.value = v;
    family.metric.push_back(m);
  }
  std::string ours = text_format({family});
  std::string theirs = prometheus_cpp({family});
  ASSERT_EQ(ours.size(), theirs.size());
  EXPECT_TRUE(ours == theirs);
}

std::string gunzip(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[65536];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  inflateEnd(&zs);
  EXPECT_EQ(rc, Z_STREAM_END);
  return out;
}

TEST(TextFormat, GzipIsReadBackByZlib) {
  std::string text;
  for (int i = 0; i < 20000; ++i)
    text += "DCGM_FI_DEV_GPU_UTIL{gpu=\"" + std::to_string(i % 8) + "\"} 97\n";
  for (const std::string& in : {std::string(), std::string("x"), text}) {
    std::string z = gzip(in);
    ASSERT_GE(z.size(), 18u);  // gzip header and trailer
    EXPECT_EQ(static_cast<unsigned char>(z[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(z[1]), 0x8b);
    EXPECT_EQ(gunzip(z), in);
  }
  EXPECT_LT(gzip(text).size(), text.size() / 10);
}

}  // namespace
}  // namespace polyaccel::exporter
