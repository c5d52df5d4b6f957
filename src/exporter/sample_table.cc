#include "exporter/sample_table.h"

namespace polyaccel::exporter {

void collect_table(const ScrapeInput& in, Vendor vendor, const std::vector<TableMetric>& table,
                   const std::function<Labels(const DeviceSeries&)>& labels, Families& out) {
  std::vector<prometheus::MetricFamily> families;
  families.reserve(table.size());
  for (const auto& m : table)
    families.push_back(family(m.name, m.help, m.type));
  for (const auto& d : in.accelerators->devices) {
    if (d.vendor != vendor || !d.sample || !d.sample->reachable) continue;
    for (const auto& series : device_series(d, *in.pods, true)) {
      Labels l = labels(series);
      for (size_t i = 0; i < table.size(); ++i) {
        if (series.mig && !table[i].per_mig_instance) continue;
        if (auto v = table[i].value(d, *d.sample)) {
          add_sample(families[i], table[i].extra.empty() ? l : with(l, table[i].extra), *v);
        }
      }
    }
  }
  for (auto& f : families) {
    if (!f.metric.empty()) out.push_back(std::move(f));
  }
}

}  // namespace polyaccel::exporter
