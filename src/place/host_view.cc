#include "place/host_view.h"

#include <algorithm>

namespace polyaccel::place {

const HostCell* HostView::cell(unsigned node) const {
  for (const auto& c : cells) {
    if (c.node == node) return &c;
  }
  return nullptr;
}

const HostDevice* HostView::device(const std::string& pci_bus_id) const {
  for (const auto& d : devices) {
    if (d.pci_bus_id == pci_bus_id) return &d;
  }
  return nullptr;
}

const IommuGroup* HostView::iommu_group_of(const std::string& pci_bus_id) const {
  auto address = PciAddress::parse(pci_bus_id);
  if (!address) return nullptr;
  for (const auto& g : iommu_groups) {
    for (const auto& m : g.members) {
      if (m.address == *address) return &g;
    }
  }
  return nullptr;
}

std::vector<PciAddress> HostView::group_companions(const PciDevice& pci) const {
  std::vector<PciAddress> out;
  if (!pci.iommu_group) return out;
  for (const auto& g : iommu_groups) {
    if (g.id != *pci.iommu_group) continue;
    for (const auto& m : g.members) {
      if (m.address != pci.address && !m.is_bridge()) out.push_back(m.address);
    }
  }
  return out;
}

LinkLevel HostView::link(size_t a, size_t b) const {
  const auto& da = devices[a];
  const auto& db = devices[b];
  if (!da.link_index || !db.link_index) return LinkLevel::sys;
  return links.at(*da.link_index, *db.link_index).level;
}

namespace {

// The DRAM node a device is local to: hwloc may give a DRAM and an HBM node together.
std::optional<unsigned> device_node(const HostModel& model, const PciDevice& pci) {
  for (unsigned n : pci.numa_nodes) {
    const NumaNode* node = model.numa_node(n);
    if (node && !node->cpus.empty()) return n;
  }
  return std::nullopt;
}

std::optional<unsigned> socket_of(const HostModel& model, unsigned node) {
  for (const auto& p : model.packages) {
    if (std::find(p.numa_nodes.begin(), p.numa_nodes.end(), node) != p.numa_nodes.end())
      return p.os_index;
  }
  return std::nullopt;
}

// HostView::cells_by_distance.
std::vector<std::vector<HostView::NearCell>> cells_by_distance(
    const std::vector<std::vector<unsigned>>& distances) {
  std::vector<std::vector<HostView::NearCell>> out(distances.size());
  for (size_t a = 0; a < distances.size(); ++a) {
    for (size_t b = 0; b < distances.size(); ++b) {
      if (b != a) out[a].push_back({b, std::min(distances[a][b], distances[b][a])});
    }
    std::stable_sort(out[a].begin(), out[a].end(),
                     [](const HostView::NearCell& x, const HostView::NearCell& y) {
                       return x.distance < y.distance;
                     });
  }
  return out;
}

// The SLIT between the cells' nodes; a missing, short or zero entry falls back to Linux's
// default (10 local, 20 remote) so that a capture without distances still compares.
std::vector<std::vector<unsigned>> cell_distances(const HostModel& model,
                                                  const std::vector<HostCell>& cells) {
  auto row_of = [&](unsigned node) -> std::optional<size_t> {
    if (!model.numa_distances) return std::nullopt;
    const auto& os = model.numa_distances->os_index;
    auto it = std::find(os.begin(), os.end(), node);
    if (it == os.end()) return std::nullopt;
    return static_cast<size_t>(it - os.begin());
  };
  std::vector<std::vector<unsigned>> d(cells.size(), std::vector<unsigned>(cells.size(), 10));
  for (size_t a = 0; a < cells.size(); ++a) {
    for (size_t b = 0; b < cells.size(); ++b) {
      if (a == b) continue;
      d[a][b] = 20;
      auto ra = row_of(cells[a].node), rb = row_of(cells[b].node);
      if (!ra || !rb) continue;
      const auto& values = model.numa_distances->values;
      if (*ra >= values.size() || *rb >= values[*ra].size()) continue;
      const std::uint64_t v = values[*ra][*rb];
      if (v > 0 && v < 255) d[a][b] = static_cast<unsigned>(v);  // SLIT entries are one byte
    }
  }
  return d;
}

HostDevice make_device(const HostModel& model, const std::string& id, const PciDevice& pci,
                       bool accelerator, bool rdma) {
  HostDevice d;
  d.id = id;
  d.pci_bus_id = pci.address.to_string();
  d.accelerator = accelerator;
  d.rdma = rdma;
  d.pci = pci;
  d.numa_node = device_node(model, pci);
  if (d.numa_node) d.socket = socket_of(model, *d.numa_node);
  if (!pci.switches.empty()) d.switch_key = pci.switches.front().upstream_port.to_string();
  d.link_index = model.links.index_of(id);
  return d;
}

}  // namespace

Result<HostView> build_host_view(const HostModel& model, const HostPolicy& policy) {
  HostView v;
  v.hostname = model.hostname;
  v.policy = policy;
  v.legacy = !policy.cpu_dedicated_set && !policy.cpu_shared_set;
  v.links = model.links;
  if (policy.cpu_dedicated_set && !model.pus.contains(*policy.cpu_dedicated_set))
    return bad_input(
        "cpu_dedicated_set",
        "names PUs " + (*policy.cpu_dedicated_set - model.pus).to_list() + " that this host lacks");
  if (policy.cpu_shared_set && !model.pus.contains(*policy.cpu_shared_set))
    return bad_input(
        "cpu_shared_set",
        "names PUs " + (*policy.cpu_shared_set - model.pus).to_list() + " that this host lacks");
  if (policy.cpu_dedicated_set && policy.cpu_shared_set &&
      policy.cpu_dedicated_set->intersects(*policy.cpu_shared_set))
    return bad_input("cpu_dedicated_set",
                     "overlaps cpu_shared_set on PUs " +
                         (*policy.cpu_dedicated_set & *policy.cpu_shared_set).to_list());
  if (policy.cpu_allocation_ratio <= 0 || policy.ram_allocation_ratio <= 0)
    return bad_input("allocation ratio", "must be positive");
  const std::uint64_t base_page = model.page_size ? model.page_size : 4096;
  for (const auto& n : model.numa_nodes) {
    if (n.cpus.empty()) continue;  // HBM, GPU memory and CPU-less nodes hold no guest cell
    HostCell c;
    c.node = n.os_index;
    c.socket = socket_of(model, n.os_index);
    // Legacy host: every PU is both; with only one set configured the other is empty.
    c.pcpus = v.legacy ? n.cpus : n.cpus & policy.cpu_dedicated_set.value_or(CpuSet{});
    c.shared_cpus = v.legacy ? n.cpus : n.cpus & policy.cpu_shared_set.value_or(CpuSet{});
    for (const auto& core : model.cores) {
      CpuSet s = core.pus & c.pcpus;
      if (s.empty()) continue;
      c.threads_per_core = std::max(c.threads_per_core, s.count());
      c.cores.push_back(s);
    }
    std::sort(c.cores.begin(), c.cores.end(),
              [](const CpuSet& a, const CpuSet& b) { return *a.first() < *b.first(); });
    c.memory_bytes = n.memory_bytes > policy.reserved_memory_per_node
                         ? n.memory_bytes - policy.reserved_memory_per_node
                         : 0;
    std::uint64_t huge_bytes = 0;
    std::vector<PagePool> huge;
    for (const auto& h : n.hugepages) {
      if (h.size_bytes <= base_page) continue;
      huge.push_back({h.size_bytes, h.total});
      huge_bytes += h.size_bytes * h.total;
    }
    std::sort(huge.begin(), huge.end(),
              [](const PagePool& a, const PagePool& b) { return a.size_bytes < b.size_bytes; });
    // Huge pages carved out of the node shrink its base-page pool (Nova counts it that way).
    std::uint64_t small = c.memory_bytes > huge_bytes ? c.memory_bytes - huge_bytes : 0;
    c.pools.push_back({base_page, small / base_page});
    c.pools.insert(c.pools.end(), huge.begin(), huge.end());
    v.cells.push_back(std::move(c));
  }
  if (v.cells.empty()) return bad_input("host", "has no NUMA node with CPUs");
  v.cell_distances = cell_distances(model, v.cells);
  v.cells_by_distance = cells_by_distance(v.cell_distances);
  for (const auto& a : model.accelerators)
    v.devices.push_back(make_device(model, a.id, a.pci, true, false));
  for (const auto& n : model.nics)
    v.devices.push_back(make_device(model, n.id, n.pci, false, n.rdma_capable()));
  v.iommu_groups = model.iommu_groups;
  return v;
}

void add_usage(const HostView& view, const Placement& p, HostUsage& u) {
  if (p.cells.empty()) {
    u.floating_vcpus += p.vcpus;
    u.floating_memory += p.memory_bytes;
  }
  for (const auto& c : p.cells) {
    // A foreign guest's cell on a node without CPUs here (a memory-only node, or a cell the
    // view leaves out) still takes memory: counted host-wide.
    if (!view.cell(c.host_numa_node)) {
      u.floating_vcpus += static_cast<unsigned>(c.shared_vcpus.size());
      u.floating_memory += c.memory_bytes;
    }
    for (size_t i = 0; i < view.cells.size(); ++i) {
      const HostCell& hc = view.cells[i];
      if (hc.node != c.host_numa_node) continue;
      CellUsage& cu = u.cells[i];
      cu.cpu_usage += static_cast<unsigned>(c.shared_vcpus.size());
      cu.memory_used += c.memory_bytes;
      for (size_t k = 0; c.page_size_bytes && k < hc.pools.size(); ++k) {
        if (hc.pools[k].size_bytes == c.page_size_bytes)
          cu.pages_used[k] += c.memory_bytes / c.page_size_bytes;
      }
    }
  }
  for (size_t i = 0; i < view.cells.size(); ++i)
    u.cells[i].held |= p.held_pus & view.cells[i].pcpus;
  for (const auto& d : p.devices)
    u.devices.insert(d.pci_bus_id);
}

Result<HostUsage> usage_of(const HostView& view, const std::vector<Placement>& allocations) {
  HostUsage u;
  u.cells.resize(view.cells.size());
  for (size_t i = 0; i < view.cells.size(); ++i)
    u.cells[i].pages_used.assign(view.cells[i].pools.size(), 0);
  CpuSet held_anywhere, pcpus;
  for (const auto& c : view.cells)
    pcpus |= c.pcpus;
  std::set<std::string> devices;
  for (const auto& p : allocations) {
    if (!p.owner.empty()) {
      // A guest polyaccel did not place (libvirt's running domains) is what the host holds, not
      // a record that could be from another host: it may be pinned outside cpu_dedicated_set,
      // share PUs with another guest or pass through a device the fit does not offer. Counted
      // as it is (add_usage keeps what this view knows), never refused.
      add_usage(view, p, u);
      continue;
    }
    const std::string input = "allocation " + p.name;
    if (!pcpus.contains(p.held_pus))
      return bad_input(input, "holds PUs " + (p.held_pus - pcpus).to_list() +
                                  " that are not dedicated PUs of this host: the state is from "
                                  "another host or another cpu_dedicated_set");
    if (held_anywhere.intersects(p.held_pus))
      return bad_input(input,
                       "holds PUs " + (held_anywhere & p.held_pus).to_list() +
                           " that another allocation holds: the state is broken",
                       "release one of them");
    held_anywhere |= p.held_pus;
    for (const auto& c : p.cells) {
      const HostCell* hc = view.cell(c.host_numa_node);
      if (!hc)
        return bad_input(input, "names NUMA node " + std::to_string(c.host_numa_node) +
                                    " that this host has no CPUs on: the state is from another "
                                    "host");
      bool pool_found = c.page_size_bytes == 0;
      for (const auto& pool : hc->pools)
        pool_found = pool_found || pool.size_bytes == c.page_size_bytes;
      if (!pool_found)
        return bad_input(input, "uses pages of " + std::to_string(c.page_size_bytes) +
                                    " bytes that node " + std::to_string(hc->node) + " lacks");
    }
    for (const auto& d : p.devices) {
      // A device the fit does not offer may come with one it does (its IOMMU group).
      if (!view.device(d.pci_bus_id) && !view.iommu_group_of(d.pci_bus_id))
        return bad_input(input, "names device " + d.pci_bus_id + " that this host lacks");
      if (!devices.insert(d.pci_bus_id).second)
        return bad_input(input, "uses device " + d.pci_bus_id +
                                    " that another allocation uses: the state is broken");
    }
    add_usage(view, p, u);
  }
  return u;
}

}  // namespace polyaccel::place
