#include "exporter/text_format.h"

#include <zlib.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace polyaccel::exporter {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// A double as an ostream with precision max_digits10 - 1 (16) in the classic locale writes it
// (printf's %.16g), and NaN and the infinities as the format spells them.
void append_value(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "Nan";
  } else if (std::isinf(value)) {
    out += value < 0 ? "-Inf" : "+Inf";
  } else {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::general, 16);
    out.append(buf, r.ptr);
  }
}

template <typename Int>
void append_int(std::string& out, Int value) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

// A label value with \, " and newline escaped; runs without them are appended whole. A plain
// loop: find_first_of with a set calls memchr once per character (a fifth of a scrape's time).
void append_escaped(std::string& out, std::string_view value) {
  size_t run = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c != '\\' && c != '"' && c != '\n') continue;
    out.append(value.data() + run, i - run);
    out += '\\';
    out += c == '\n' ? 'n' : c;
    run = i + 1;
  }
  out.append(value.data() + run, value.size() - run);
}

// name{labels[,extra="value"]} and the space before the value.
void append_head(std::string& out, const MetricFamily& family, const ClientMetric& metric,
                 std::string_view suffix = {}, std::string_view extra_name = {},
                 const double* extra_number = nullptr, std::string_view extra_text = {}) {
  out += family.name;
  out += suffix;
  if (!metric.label.empty() || !extra_name.empty()) {
    out += '{';
    const char* separator = "";
    for (const auto& label : metric.label) {
      out += separator;
      out += label.name;
      out += "=\"";
      append_escaped(out, label.value);
      out += '"';
      separator = ",";
    }
    if (!extra_name.empty()) {
      out += separator;
      out += extra_name;
      out += "=\"";
      if (extra_number) {
        append_value(out, *extra_number);
      } else {
        append_escaped(out, extra_text);
      }
      out += '"';
    }
    out += '}';
  }
  out += ' ';
}

void append_tail(std::string& out, const ClientMetric& metric) {
  if (metric.timestamp_ms != 0) {
    out += ' ';
    append_int(out, metric.timestamp_ms);
  }
  out += '\n';
}

void append_metric(std::string& out, const MetricFamily& family, const ClientMetric& metric) {
  switch (family.type) {
    case MetricType::Counter:
    case MetricType::Gauge:
    case MetricType::Untyped:
      append_head(out, family, metric);
      append_value(out, family.type == MetricType::Counter ? metric.counter.value
                        : family.type == MetricType::Gauge ? metric.gauge.value
                                                           : metric.untyped.value);
      append_tail(out, metric);
      break;
    case MetricType::Summary:
      append_head(out, family, metric, "_count");
      append_int(out, metric.summary.sample_count);
      append_tail(out, metric);
      append_head(out, family, metric, "_sum");
      append_value(out, metric.summary.sample_sum);
      append_tail(out, metric);
      for (const auto& q : metric.summary.quantile) {
        append_head(out, family, metric, {}, "quantile", &q.quantile);
        append_value(out, q.value);
        append_tail(out, metric);
      }
      break;
    case MetricType::Histogram: {
      const auto& h = metric.histogram;
      append_head(out, family, metric, "_count");
      append_int(out, h.sample_count);
      append_tail(out, metric);
      append_head(out, family, metric, "_sum");
      append_value(out, h.sample_sum);
      append_tail(out, metric);
      double last = -INFINITY;
      for (const auto& b : h.bucket) {
        append_head(out, family, metric, "_bucket", "le", &b.upper_bound);
        last = b.upper_bound;
        append_int(out, b.cumulative_count);
        append_tail(out, metric);
      }
      if (last != INFINITY) {
        append_head(out, family, metric, "_bucket", "le", nullptr, "+Inf");
        append_int(out, h.sample_count);
        append_tail(out, metric);
      }
      break;
    }
  }
}

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Summary:
      return "summary";
    case MetricType::Untyped:
      return "untyped";
    case MetricType::Histogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string text_format(const std::vector<MetricFamily>& families) {
  std::string out;
  size_t estimate = 0;
  for (const auto& f : families)
    estimate += 64 + f.help.size() + f.metric.size() * 160;
  out.reserve(estimate);
  for (const auto& family : families) {
    if (!family.help.empty()) {
      out += "# HELP ";
      out += family.name;
      out += ' ';
      out += family.help;
      out += '\n';
    }
    out += "# TYPE ";
    out += family.name;
    out += ' ';
    out += type_name(family.type);
    out += '\n';
    for (const auto& metric : family.metric)
      append_metric(out, family, metric);
  }
  return out;
}

std::string hw_text_format(const std::vector<HwMetric>& metrics) {
  std::string out;
  for (const auto& m : metrics) {
    out += "# HELP \"";
    append_escaped(out, m.name);
    out += "\" ";
    for (char c : m.description) {
      if (c == '\\')
        out += "\\\\";
      else if (c == '\n')
        out += "\\n";
      else
        out += c;
    }
    out += "\n# TYPE \"";
    append_escaped(out, m.name);
    out += m.instrument == HwInstrument::counter ? "\" counter\n" : "\" gauge\n";
    for (const auto& p : m.points) {
      out += "{\"";
      append_escaped(out, m.name);
      out += '"';
      for (const auto& [key, value] : p.attributes) {
        out += ",\"";
        append_escaped(out, key);
        out += "\"=\"";
        append_escaped(out, value);
        out += '"';
      }
      out += "} ";
      append_value(out, p.value);
      out += '\n';
    }
  }
  return out;
}

std::string gzip(std::string_view data) {
  // zlib counts input and output in uInt: a body past half of it (its compressed bound must fit
  // too) is not compressed, and the answer goes out plain.
  if (data.size() > std::numeric_limits<uInt>::max() / 2) return {};
  z_stream zs{};
  // windowBits 15 + 16: a gzip header and trailer, not zlib's.
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return {};
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return {};
  // The bound is the size of the text and more (280 KB for the full node's 11 KB of gzip): the
  // cached body keeps this string, so it keeps only what it holds.
  out.shrink_to_fit();
  return out;
}

}  // namespace polyaccel::exporter
