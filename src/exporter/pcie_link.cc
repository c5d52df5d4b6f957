// PCIe link speed and width of accelerators and NICs against their maximum: a GPU that trained
// at x8 or Gen3 after a reseat halves its host bandwidth without any error.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class PcieLinkCollector : public Collector {
 public:
  std::string name() const override { return "pcie_link"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    auto speed = family("polyaccel_pcie_link_speed_transfers_per_second",
                        "PCIe link speed per lane (2.5e9 for Gen1 ... 32e9 for Gen5); "
                        "bound=current or max.",
                        MetricType::Gauge);
    auto width = family("polyaccel_pcie_link_width_lanes", "PCIe link width; bound=current or max.",
                        MetricType::Gauge);
    auto add = [&](const std::string& id, const std::string& kind, const PciDevice& pci) {
      Labels l = {{"device", id}, {"kind", kind}, {"pci_bus_id", pci.address.to_string()}};
      const PciLink& link = pci.link;
      if (link.speed_gts > 0)
        add_sample(speed, with(l, {{"bound", "current"}}), link.speed_gts * 1e9);
      if (link.max_speed_gts > 0)
        add_sample(speed, with(l, {{"bound", "max"}}), link.max_speed_gts * 1e9);
      if (link.width > 0) add_sample(width, with(l, {{"bound", "current"}}), link.width);
      if (link.max_width > 0) add_sample(width, with(l, {{"bound", "max"}}), link.max_width);
    };
    for (const auto& a : in.host->host->accelerators)
      add(a.id, "accelerator", a.pci);
    for (const auto& n : in.host->host->nics)
      add(n.id, "nic", n.pci);
    emit(out, {&speed, &width});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_pcie_link_collector() {
  return std::make_unique<PcieLinkCollector>();
}

}  // namespace polyaccel::exporter
