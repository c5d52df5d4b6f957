// Hugepages per NUMA node and page size: a VM pinned to node 1 fails to start when node 1 has no
// free 1 GiB pages, even with plenty free on node 0.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class HugepagesCollector : public Collector {
 public:
  std::string name() const override { return "hugepages"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    auto total = family("polyaccel_hugepages_pages", "Hugepages reserved on a NUMA node.",
                        MetricType::Gauge);
    auto free = family("polyaccel_hugepages_free_pages", "Hugepages free on a NUMA node.",
                       MetricType::Gauge);
    for (const auto& n : in.host->host->numa_nodes) {
      for (const auto& h : n.hugepages) {
        Labels l = {{"numa_node", std::to_string(n.os_index)},
                    {"page_size_bytes", std::to_string(h.size_bytes)}};
        add_sample(total, l, static_cast<double>(h.total));
        if (h.free) add_sample(free, l, static_cast<double>(*h.free));
      }
    }
    emit(out, {&total, &free});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_hugepages_collector() {
  return std::make_unique<HugepagesCollector>();
}

}  // namespace polyaccel::exporter
