// Per NUMA node memory (nodeN/meminfo) and allocation counters (nodeN/numastat): a job whose
// memory lands on the wrong node shows as numa_miss / other_node growing.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class NumaMemoryCollector : public Collector {
 public:
  std::string name() const override { return "numa_memory"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    auto total =
        family("polyaccel_numa_memory_total_bytes", "Memory of a NUMA node.", MetricType::Gauge);
    auto free = family("polyaccel_numa_memory_free_bytes", "Free memory of a NUMA node.",
                       MetricType::Gauge);
    auto allocs = family("polyaccel_numa_allocations_total",
                         "Page allocations by outcome, from the node's numastat (numa_hit, "
                         "numa_miss, numa_foreign, interleave_hit, local_node, other_node).",
                         MetricType::Counter);
    for (const auto& n : in.host->numa) {
      Labels node = {{"numa_node", std::to_string(n.node)}};
      if (n.memory_total_bytes) add_sample(total, node, static_cast<double>(*n.memory_total_bytes));
      if (n.memory_free_bytes) add_sample(free, node, static_cast<double>(*n.memory_free_bytes));
      for (const auto& [type, count] : n.numastat)
        add_sample(allocs, with(node, {{"type", type}}), static_cast<double>(count));
    }
    emit(out, {&total, &free, &allocs});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_numa_memory_collector() {
  return std::make_unique<NumaMemoryCollector>();
}

}  // namespace polyaccel::exporter
