// What the DRA driver's CPU and memory devices are holding (--dra-cpus, --dra-memory; through
// core/dra_status.h): the CPUs and memory each prepared claim holds on each NUMA node, and the
// offered CPUs of each node that no claim holds. Nothing without them.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class DraClaimsCollector : public Collector {
 public:
  std::string name() const override { return "dra_claims"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    if (!in.dra) return Ok{};
    const DraStatus& s = *in.dra;
    auto cpus = family("polyaccel_dra_claim_cpus",
                       "CPUs a prepared ResourceClaim holds through polyaccel.io CPU devices, by "
                       "NUMA node.",
                       MetricType::Gauge);
    auto memory = family("polyaccel_dra_claim_memory_bytes",
                         "Memory of the NUMA nodes a prepared ResourceClaim holds through "
                         "polyaccel.io memory devices.",
                         MetricType::Gauge);
    auto free = family("polyaccel_dra_free_cpus",
                       "CPUs offered as polyaccel.io CPU devices that no prepared claim holds, by "
                       "NUMA node.",
                       MetricType::Gauge);
    for (const auto& h : s.claim_holdings) {
      Labels l = {
          {"namespace", h.ns}, {"claim", h.name}, {"numa_node", std::to_string(h.numa_node)}};
      if (h.cpus) add_sample(cpus, l, h.cpus);
      if (h.memory_bytes) add_sample(memory, l, static_cast<double>(h.memory_bytes));
    }
    for (const auto& [node, n] : s.free_cpus)
      add_sample(free, {{"numa_node", std::to_string(node)}}, n);
    emit(out, {&cpus, &memory, &free});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_dra_claims_collector() {
  return std::make_unique<DraClaimsCollector>();
}

}  // namespace polyaccel::exporter
