#include "discover/links.h"

#include <algorithm>

namespace polyaccel {

namespace {
bool share_numa_node(const PciDevice& a, const PciDevice& b) {
  for (unsigned n : a.numa_nodes) {
    if (std::find(b.numa_nodes.begin(), b.numa_nodes.end(), n) != b.numa_nodes.end()) return true;
  }
  return false;
}
}  // namespace

LinkLevel pcie_level(const HostModel& model, const PciDevice& a, const PciDevice& b) {
  (void)model;
  if (a.address == b.address) return LinkLevel::self;
  // Functions of one device (the two ports of a NIC) meet inside the device.
  if (a.address.same_device(b.address)) return LinkLevel::pix;
  if (a.host_bridge >= 0 && a.host_bridge == b.host_bridge) {
    size_t common = 0;
    while (common < a.switches.size() && common < b.switches.size() &&
           a.switches[common].upstream_port == b.switches[common].upstream_port) {
      ++common;
    }
    if (common == 0) return LinkLevel::phb;
    // The deepest common switch plus those below it on each side.
    size_t crossed = 1 + (a.switches.size() - common) + (b.switches.size() - common);
    return crossed == 1 ? LinkLevel::pix : LinkLevel::pxb;
  }
  return share_numa_node(a, b) ? LinkLevel::node : LinkLevel::sys;
}

LinkMatrix compute_link_matrix(const HostModel& model) {
  LinkMatrix m;
  std::vector<const PciDevice*> pci;
  for (const auto& a : model.accelerators) {
    m.devices.push_back(a.id);
    pci.push_back(&a.pci);
  }
  for (const auto& n : model.nics) {
    m.devices.push_back(n.id);
    pci.push_back(&n.pci);
  }
  const size_t na = model.accelerators.size();
  m.cells.assign(pci.size(), std::vector<Link>(pci.size()));
  for (size_t i = 0; i < pci.size(); ++i) {
    for (size_t j = i; j < pci.size(); ++j) {
      Link link{pcie_level(model, *pci[i], *pci[j]), 0};
      if (i < na && j < na && i != j) {
        // A direct link seen from either side; the larger NVLink count wins.
        for (auto [from, to] : {std::pair{i, j}, std::pair{j, i}}) {
          for (const auto& p : model.accelerators[from].peer_links) {
            if (p.peer != model.accelerators[to].pci.address) continue;
            if (link.level != LinkLevel::nvlink && link.level != LinkLevel::xgmi) {
              link = p.link;
            } else if (p.link.level == link.level && p.link.count > link.count) {
              link = p.link;
            }
          }
        }
      }
      m.cells[i][j] = link;
      m.cells[j][i] = link;
    }
  }
  return m;
}

void assign_closest_nics(HostModel& model) {
  const size_t na = model.accelerators.size();
  bool any_rdma = std::any_of(model.nics.begin(), model.nics.end(),
                              [](const Nic& n) { return n.rdma_capable(); });
  for (size_t i = 0; i < na; ++i) {
    auto& acc = model.accelerators[i];
    acc.closest_nics.clear();
    LinkLevel best = LinkLevel::sys;
    bool found = false;
    for (size_t k = 0; k < model.nics.size(); ++k) {
      const auto& nic = model.nics[k];
      if (any_rdma && !nic.rdma_capable()) continue;
      LinkLevel l = model.links.cells[i][na + k].level;
      if (!found || l < best) {
        best = l;
        found = true;
        acc.closest_nics.clear();
      }
      if (l == best) acc.closest_nics.push_back(nic.id);
    }
  }
}

}  // namespace polyaccel
