#include "exporter/sample_table.h"

namespace polyaccel::exporter {

void collect_table(const ScrapeInput& in, std::optional<Vendor> vendor,
                   const std::vector<TableMetric>& table,
                   const std::function<Labels(const DeviceSeries&)>& labels, Families& out) {
  std::vector<prometheus::MetricFamily> families;
  std::vector<size_t> family_of;  // table row → index into families
  for (const auto& m : table) {
    size_t i = 0;
    while (i < families.size() && families[i].name != m.name)
      ++i;
    if (i == families.size()) families.push_back(family(m.name, m.help, m.type));
    family_of.push_back(i);
  }
  for (const auto& d : in.accelerators->devices) {
    if ((vendor && d.vendor != *vendor) || !d.sample || !d.sample->reachable) continue;
    for (const auto& series : device_series(d, *in.pods, true)) {
      Labels l = labels(series);
      for (size_t i = 0; i < table.size(); ++i) {
        if (series.mig && !table[i].per_mig_instance) continue;
        if (auto v = table[i].value(d, *d.sample)) {
          add_sample(families[family_of[i]], table[i].extra.empty() ? l : with(l, table[i].extra),
                     *v);
        }
      }
    }
  }
  for (auto& f : families) {
    if (!f.metric.empty()) out.push_back(std::move(f));
  }
}

}  // namespace polyaccel::exporter
