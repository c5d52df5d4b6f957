#include "exporter/families.h"

namespace polyaccel::exporter {

prometheus::MetricFamily family(const std::string& name, const std::string& help,
                                prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void add_sample(prometheus::MetricFamily& family, Labels labels, double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  switch (family.type) {
    case prometheus::MetricType::Counter:
      m.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      m.gauge.value = value;
      break;
    default:
      m.untyped.value = value;
      break;
  }
  family.metric.push_back(std::move(m));
}

Labels with(Labels base, const Labels& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

void emit(std::vector<prometheus::MetricFamily>& out,
          std::initializer_list<prometheus::MetricFamily*> families) {
  for (auto* f : families) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
}

}  // namespace polyaccel::exporter
