#include "exporter/families_json.h"

#include <cmath>

namespace polyaccel::exporter {
namespace {

const char* type_name(prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Summary:
      return "summary";
    case prometheus::MetricType::Histogram:
      return "histogram";
    case prometheus::MetricType::Untyped:
      return "untyped";
  }
  return "untyped";
}

// JSON has no NaN or infinities: they are written as Prometheus spells them, as strings.
nlohmann::json number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return v;
}

}  // namespace

nlohmann::json families_json(const Families& families) {
  nlohmann::json out = {{"schema_version", kScrapeJsonSchemaVersion}};
  out["families"] = nlohmann::json::array();
  for (const auto& f : families) {
    nlohmann::json family = {{"name", f.name}, {"help", f.help}, {"type", type_name(f.type)}};
    family["samples"] = nlohmann::json::array();
    for (const auto& m : f.metric) {
      nlohmann::json labels = nlohmann::json::object();
      for (const auto& l : m.label)
        labels[l.name] = l.value;
      nlohmann::json value;
      switch (f.type) {
        case prometheus::MetricType::Counter:
          value = number(m.counter.value);
          break;
        case prometheus::MetricType::Gauge:
          value = number(m.gauge.value);
          break;
        case prometheus::MetricType::Untyped:
          value = number(m.untyped.value);
          break;
        case prometheus::MetricType::Summary:
          value = {{"count", m.summary.sample_count}, {"sum", number(m.summary.sample_sum)}};
          break;
        case prometheus::MetricType::Histogram:
          value = {{"count", m.histogram.sample_count}, {"sum", number(m.histogram.sample_sum)}};
          break;
      }
      family["samples"].push_back({{"labels", labels}, {"value", value}});
    }
    out["families"].push_back(family);
  }
  return out;
}

}  // namespace polyaccel::exporter
