// A compatibility name set is a table: metric name, help, type, and how to read the value from
// a device's last sample. The collectors of dcgm.cc, amd.cc and habana.cc walk their table.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "exporter/collector.h"
#include "exporter/device_series.h"

namespace polyaccel::exporter {

struct TableMetric {
  std::string name;
  std::string help;
  prometheus::MetricType type = prometheus::MetricType::Gauge;
  std::function<std::optional<double>(const MonitoredDevice&, const AcceleratorSample&)> value;
  bool per_mig_instance = false;  // also on MIG instances' series (physical, device-wide values)
  Labels extra = {};              // labels of this metric alone ("clock_type")
};

// For every device of `vendor` with a reachable sample and every series of it, adds each table
// metric that has a value, labelled by `labels(series)`. Families come out in table order.
void collect_table(const ScrapeInput& in, Vendor vendor, const std::vector<TableMetric>& table,
                   const std::function<Labels(const DeviceSeries&)>& labels, Families& out);

template <class T>
std::optional<double> as_double(const std::optional<T>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

}  // namespace polyaccel::exporter
