// The placement state (src/place, `polyaccel place --commit`): PUs pinned and free per NUMA node,
// memory and hugepages held, devices held. A scheduler or an operator sees at a glance which node
// can still take a pinned guest. Read by the host sampler from the allocation store, never here.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class PlacementStateCollector : public Collector {
 public:
  std::string name() const override { return "placement"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    const PlacementSample& s = *in.host->placement;
    if (s.time.time_since_epoch().count() == 0) return Ok{};  // no state file configured
    if (!s.error.empty()) {
      return Error{ErrorCode::bad_input, "placement state", s.error, {}};
    }
    auto allocations =
        family("polyaccel_placement_allocations",
               "Placements committed in the allocation state, and guests libvirt runs.",
               MetricType::Gauge);
    auto pinned = family("polyaccel_placement_pinned_pus",
                         "PUs of a NUMA node held alone by placements.", MetricType::Gauge);
    auto free = family("polyaccel_placement_free_pus",
                       "PUs of a NUMA node a placement may still pin.", MetricType::Gauge);
    auto memory = family("polyaccel_placement_memory_bytes", "Guest memory placed on a NUMA node.",
                         MetricType::Gauge);
    auto pages =
        family("polyaccel_placement_hugepages_held_pages",
               "Hugepages of a NUMA node held by placements, per page size.", MetricType::Gauge);
    auto devices =
        family("polyaccel_placement_device_held",
               "1 when a placement holds the device (passthrough), else 0.", MetricType::Gauge);
    add_sample(allocations, {}, static_cast<double>(s.allocations));
    for (const auto& n : s.nodes) {
      Labels node = {{"numa_node", std::to_string(n.node)}};
      add_sample(pinned, node, n.pinned_pus);
      add_sample(free, node, n.pinnable_pus - n.pinned_pus);
      add_sample(memory, node, static_cast<double>(n.memory_bytes));
      for (const auto& p : n.hugepages) {
        add_sample(pages, with(node, {{"page_size_bytes", std::to_string(p.size_bytes)}}),
                   static_cast<double>(p.held));
      }
    }
    for (const auto& d : s.devices) {
      add_sample(devices,
                 {{"device", d.id},
                  {"pci_bus_id", d.pci_bus_id},
                  {"numa_node", d.node ? std::to_string(*d.node) : ""}},
                 d.held ? 1 : 0);
    }
    emit(out, {&allocations, &pinned, &free, &memory, &pages, &devices});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_placement_state_collector() {
  return std::make_unique<PlacementStateCollector>();
}

}  // namespace polyaccel::exporter
