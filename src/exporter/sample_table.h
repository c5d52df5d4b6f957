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
  Labels extra = {};  // labels of this metric alone ("clock_type")
  // A quantity each MIG instance has of its own (memory, engine activity): on a GPU in MIG mode
  // it is on the instances' series, from their samples, and not on the GPU's own series, so that
  // a sum over the series counts nothing twice. Rows without it are GPU-wide (power,
  // temperature, clocks): on the GPU's series only.
  std::function<std::optional<double>(const MigInstanceSample&)> mig_value = nullptr;
};

// The sample of MIG instance `gpu_instance_id` in `sample`; null when it has none.
const MigInstanceSample* mig_sample(const AcceleratorSample& sample, unsigned gpu_instance_id);

// For every device of `vendor` (every device: nullopt) with a reachable sample and every series
// of it, adds each table metric that has a value, labelled by `labels(series)` and the row's
// extra labels. Rows that share a name share one family; families come out in table order.
void collect_table(const ScrapeInput& in, std::optional<Vendor> vendor,
                   const std::vector<TableMetric>& table,
                   const std::function<Labels(const DeviceSeries&)>& labels, Families& out);

template <class T>
std::optional<double> as_double(const std::optional<T>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

}  // namespace polyaccel::exporter
