#include "discover/links.h"

#include "core/strings.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace polyaccel {

// The DRAM node of a device (a device may list a DRAM and an HBM node).
std::optional<unsigned> dram_node(const HostModel& model, const PciDevice& pci) {
  for (unsigned n : pci.numa_nodes) {
    const NumaNode* node = model.numa_node(n);
    if (node && !node->cpus.empty()) return n;
  }
  return std::nullopt;
}

namespace {
bool share_numa_node(const PciDevice& a, const PciDevice& b) {
  for (unsigned n : a.numa_nodes) {
    if (std::find(b.numa_nodes.begin(), b.numa_nodes.end(), n) != b.numa_nodes.end()) return true;
  }
  return false;
}

// The SLIT distance between two devices' nodes; 10 on one node, 255 (unreachable) when either
// node or the matrix is unknown, so that a known distance always wins a tie.
std::uint64_t numa_distance(const HostModel& model, const PciDevice& a, const PciDevice& b) {
  auto na = dram_node(model, a), nb = dram_node(model, b);
  if (!na || !nb) return 255;
  if (*na == *nb) return 10;
  if (!model.numa_distances) return 255;
  const auto& os = model.numa_distances->os_index;
  auto ia = std::find(os.begin(), os.end(), *na), ib = std::find(os.begin(), os.end(), *nb);
  if (ia == os.end() || ib == os.end()) return 255;
  const auto& values = model.numa_distances->values;
  const size_t ra = static_cast<size_t>(ia - os.begin()), rb = static_cast<size_t>(ib - os.begin());
  if (ra >= values.size() || rb >= values[ra].size()) return 255;
  return values[ra][rb];
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
    std::pair<LinkLevel, std::uint64_t> best{LinkLevel::sys, 0};
    bool found = false;
    for (size_t k = 0; k < model.nics.size(); ++k) {
      const auto& nic = model.nics[k];
      if (any_rdma && !nic.rdma_capable()) continue;
      std::pair<LinkLevel, std::uint64_t> key{model.links.cells[i][na + k].level,
                                              numa_distance(model, acc.pci, nic.pci)};
      if (!found || key < best) {
        best = key;
        found = true;
        acc.closest_nics.clear();
      }
      if (key == best) acc.closest_nics.push_back(nic.id);
    }
  }
}

std::vector<const Nic*> nccl_nics(const HostModel& model, const Accelerator& accelerator) {
  std::vector<const Nic*> out;
  auto socket_of = [&](const PciDevice& pci) -> std::optional<unsigned> {
    auto node = dram_node(model, pci);
    if (!node) return std::nullopt;
    for (const auto& p : model.packages) {
      if (std::find(p.numa_nodes.begin(), p.numa_nodes.end(), *node) != p.numa_nodes.end())
        return p.os_index;
    }
    return std::nullopt;
  };
  auto a = model.links.index_of(accelerator.id);
  for (const auto& id : accelerator.closest_nics) {
    const Nic* nic = model.nic(id);
    auto n = model.links.index_of(id);
    if (!nic || !a || !n) continue;
    const bool local = model.links.at(*a, *n).level <= LinkLevel::node;
    const auto socket = socket_of(accelerator.pci);
    if (local || (socket && socket == socket_of(nic->pci))) out.push_back(nic);
  }
  return out;
}

bool efa_supports_rdma_read(const Nic& nic) {
  // Neither hwloc nor sysfs shows the EFA device's capabilities (efadv_query_device does, through
  // libibverbs), so the PCI device id tells the generation: 0xefa0 is EFA gen 1 (g4dn, p3dn),
  // without RDMA read; 0xefa1 gen 2 (p4d) and 0xefa2 gen 3 (p5) have it. Ids not listed here get
  // no setting: libfabric then decides from the device itself.
  if (nic.fabric != "efa" || nic.pci.vendor_id != 0x1d0f) return false;
  return nic.pci.device_id == 0xefa1 || nic.pci.device_id == 0xefa2;
}

std::vector<std::pair<std::string, std::string>> nccl_network_env(
    const std::vector<const Nic*>& nics,
    const std::function<bool(const std::string&)>& usable_netdev) {
  std::vector<std::string> hcas, ucx, ifnames;
  std::string provider;
  bool efa = false, efa_rdma = true;
  auto add_unique = [](std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
  };
  for (const Nic* nic : nics) {
    if (nic->fabric == "efa") {
      provider = "efa";
      efa = true;
      efa_rdma = efa_rdma && efa_supports_rdma_read(*nic);
    } else if (nic->fabric == "slingshot") {
      if (provider.empty()) provider = "cxi";
    } else {
      for (const auto& r : nic->rdma_devices) {
        add_unique(hcas, r);
        add_unique(ucx, r + ":1");
      }
    }
    for (const auto& n : nic->netdevs) {
      if (usable_netdev && usable_netdev(n)) add_unique(ifnames, n);
    }
  }
  std::vector<std::pair<std::string, std::string>> env;
  // "=" makes NCCL match whole names: without it mlx5_1 also selects mlx5_10..mlx5_19.
  if (!hcas.empty()) env.emplace_back("NCCL_IB_HCA", "=" + join(hcas, ","));
  if (!ucx.empty()) env.emplace_back("UCX_NET_DEVICES", join(ucx, ","));
  if (!provider.empty()) env.emplace_back("FI_PROVIDER", provider);
  // libfabric aborts at init when asked for device RDMA on an EFA without RDMA read.
  if (efa && efa_rdma) env.emplace_back("FI_EFA_USE_DEVICE_RDMA", "1");
  if (!ifnames.empty()) env.emplace_back("NCCL_SOCKET_IFNAME", "=" + join(ifnames, ","));
  return env;
}

}  // namespace polyaccel
