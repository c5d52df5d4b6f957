#include "exporter/sample_table.h"

namespace polyaccel::exporter {

const MigInstanceSample* mig_sample(const AcceleratorSample& sample, unsigned gpu_instance_id) {
  for (const auto& m : sample.mig_instances) {
    if (m.gpu_instance_id == gpu_instance_id) return &m;
  }
  return nullptr;
}

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
      bool mig_mode = d.inventory.mig_enabled.value_or(false);
      const MigInstanceSample* instance =
          series.mig ? mig_sample(*d.sample, series.mig->gpu_instance_id) : nullptr;
      for (size_t i = 0; i < table.size(); ++i) {
        std::optional<double> v;
        if (series.mig) {
          if (table[i].mig_value && instance) v = table[i].mig_value(*instance);
        } else if (!(mig_mode && table[i].mig_value)) {
          v = table[i].value(d, *d.sample);
        }
        if (v) {
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
