// Reading a scrape's families in tests: the value of a sample, the number of series.
#pragma once

#include <algorithm>
#include <optional>
#include <string>

#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {

// The value of the one sample of `name` whose labels include `labels`; nullopt when none.
inline std::optional<double> value(const Families& families, const std::string& name,
                                   const Labels& labels) {
  for (const auto& f : families) {
    if (f.name != name) continue;
    for (const auto& m : f.metric) {
      bool all = std::all_of(labels.begin(), labels.end(), [&](const auto& want) {
        return std::find(m.label.begin(), m.label.end(), want) != m.label.end();
      });
      if (!all) continue;
      return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return std::nullopt;
}

inline size_t count(const Families& families, const std::string& name, const Labels& labels = {}) {
  size_t n = 0;
  for (const auto& f : families) {
    if (f.name != name) continue;
    for (const auto& m : f.metric) {
      n += std::all_of(labels.begin(), labels.end(), [&](const auto& want) {
        return std::find(m.label.begin(), m.label.end(), want) != m.label.end();
      });
    }
  }
  return n;
}

}  // namespace polyaccel::exporter
