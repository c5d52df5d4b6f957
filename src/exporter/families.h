// Small helpers to build prometheus-cpp metric families by hand (collectors return plain
// MetricFamily values; no prometheus-cpp registry holds state between scrapes).
#pragma once

#include <string>
#include <vector>

#include <prometheus/metric_family.h>

namespace polyaccel::exporter {

using Labels = std::vector<prometheus::ClientMetric::Label>;

prometheus::MetricFamily family(const std::string& name, const std::string& help,
                                prometheus::MetricType type);

// Appends one sample to a gauge, counter or untyped family.
void add_sample(prometheus::MetricFamily& family, Labels labels, double value);

// Labels plus more.
Labels with(Labels base, const Labels& more);

// Moves the families that got samples to `out` (an empty family only confuses promtool).
void emit(std::vector<prometheus::MetricFamily>& out,
          std::initializer_list<prometheus::MetricFamily*> families);

}  // namespace polyaccel::exporter
