#include "dra/slices.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "dra/cpu_devices.h"
#include "share/mig_profiles.h"

namespace polyaccel::dra {

namespace {

using json = nlohmann::json;

constexpr std::uint64_t kMiB = 1024ull * 1024;
constexpr std::uint64_t kGiB = kMiB * 1024;

// "1g.10gb+me" → "1g-10gb-me": a MIG profile inside a DNS label.
std::string label_part(const std::string& text) {
  std::string out;
  for (char c : text) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if ((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9')) {
      out += l;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-')
    out.pop_back();
  return out;
}

std::string std_attr(const char* name) {
  return std::string(kStandardPrefix) + name;
}

// "pci0000:17": the root complex, as the first element of the device's /sys/devices path.
std::optional<std::string> pcie_root(const HostModel& model, const PciDevice& pci) {
  if (pci.host_bridge < 0 || static_cast<size_t>(pci.host_bridge) >= model.host_bridges.size())
    return std::nullopt;
  const HostBridge& hb = model.host_bridges[static_cast<size_t>(pci.host_bridge)];
  if (hb.domain > 0xffff || hb.bus_first > 0xff) return std::nullopt;
  char buf[16];
  std::snprintf(buf, sizeof buf, "pci%04x:%02x", hb.domain, hb.bus_first);
  return std::string(buf);
}

// The device's one NUMA node with memory and CPUs (what sysfs numa_node says); none when hwloc
// puts it under several (a package-wide locality) or none.
std::optional<unsigned> numa_node_of(const HostModel& model, const std::vector<unsigned>& nodes) {
  std::optional<unsigned> found;
  for (unsigned n : nodes) {
    const NumaNode* node = model.numa_node(n);
    if (node && node->kind != NumaKind::dram) continue;
    if (found) return std::nullopt;
    found = n;
  }
  return found;
}

std::optional<unsigned> package_of(const HostModel& model, std::optional<unsigned> numa,
                                   const CpuSet& local_cpus) {
  for (const auto& p : model.packages) {
    if (numa && std::find(p.numa_nodes.begin(), p.numa_nodes.end(), *numa) != p.numa_nodes.end())
      return p.os_index;
  }
  if (!local_cpus.empty()) {
    std::optional<unsigned> found;
    for (const auto& p : model.packages) {
      if (!p.cpus.intersects(local_cpus)) continue;
      if (found) return std::nullopt;
      found = p.os_index;
    }
    return found;
  }
  return std::nullopt;
}

void add_pci_attributes(Device& d, const HostModel& model, const PciDevice& pci,
                        std::optional<unsigned> numa) {
  d.attributes[std_attr("pciBusID")] = Attribute::of_string(pci.address.to_string());
  if (auto root = pcie_root(model, pci))
    d.attributes[std_attr("pcieRoot")] = Attribute::of_string(*root);
  if (numa) d.attributes[std_attr("numaNode")] = Attribute::of_int(*numa);
  if (auto pkg = package_of(model, numa, pci.local_cpus))
    d.attributes["package"] = Attribute::of_int(*pkg);
}

// Connected components of the accelerators over links of one kind: domain index by accelerator.
std::vector<std::optional<unsigned>> link_domains(const HostModel& model, LinkLevel level) {
  const size_t n = model.accelerators.size();
  std::vector<size_t> parent(n);
  for (size_t i = 0; i < n; ++i)
    parent[i] = i;
  std::function<size_t(size_t)> find = [&](size_t x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  };
  std::vector<bool> linked(n, false);
  for (size_t i = 0; i < n; ++i) {
    for (const auto& pl : model.accelerators[i].peer_links) {
      if (pl.link.level != level) continue;
      for (size_t j = 0; j < n; ++j) {
        if (model.accelerators[j].pci.address != pl.peer) continue;
        linked[i] = linked[j] = true;
        size_t a = find(i), b = find(j);
        if (a != b) parent[std::max(a, b)] = std::min(a, b);
      }
    }
  }
  std::vector<std::optional<unsigned>> out(n);
  std::map<size_t, unsigned> ids;
  for (size_t i = 0; i < n; ++i) {
    if (!linked[i]) continue;
    size_t r = find(i);
    auto it = ids.emplace(r, static_cast<unsigned>(ids.size())).first;
    out[i] = it->second;
  }
  return out;
}

// The best PCIe level from accelerator i to an RDMA NIC, and that NIC's index.
std::optional<std::pair<Link, size_t>> nearest_nic(const HostModel& model, size_t i) {
  auto row = model.links.index_of(model.accelerators[i].id);
  if (!row) return std::nullopt;
  std::optional<std::pair<Link, size_t>> best;
  for (size_t k = 0; k < model.nics.size(); ++k) {
    if (!model.nics[k].rdma_capable()) continue;
    auto col = model.links.index_of(model.nics[k].id);
    if (!col || *row >= model.links.cells.size() || *col >= model.links.cells[*row].size())
      continue;
    const Link& l = model.links.at(*row, *col);
    if (!best || l.level < best->first.level) best = std::make_pair(l, k);
  }
  return best;
}

std::string gpu_name(const Accelerator& a, size_t i) {
  return (a.vendor == Vendor::intel_gaudi ? "hpu-" : "gpu-") + std::to_string(i);
}

void add_counter(CounterConsumption& c, const std::string& name, std::uint64_t value) {
  c.counters[name] = std::to_string(value);
}

// One unit of packing: a counter set (maybe none) and the devices that consume it. With
// CounterLayout::with_devices (1.34) a unit is never split over two slices, because a device
// consumes counters of its own slice there; with own_slices its set and devices go apart.
struct Unit {
  std::optional<CounterSet> counters;
  std::vector<Device> devices;
};

struct MigDeviceSpec {
  std::string profile;
  unsigned start = 0, size = 0, compute = 0;
  std::uint64_t memory_bytes = 0;
  std::optional<size_t> instance;
  std::string uuid;
};

// What a MIG GPU's existing instances hold, and so what is left for new ones: the counter set of
// the placements. Existing instances are devices of their own and consume nothing; a placement is
// published only where it fits what they leave, so no allocation of placements, whichever, can
// overlap an instance that exists (whether a claim holds it or not, before or after a restart).
struct MigFree {
  std::vector<bool> memory_slice;  // free, by memory slice
  unsigned compute = 0;
  bool media_extension = true;
  bool known = true;  // false: an instance of unknown size or profile: offer no placement
};

void add_mig_devices(Unit& unit, const Device& parent, const Accelerator& a, size_t index,
                     const MigGeometry* geometry, const SliceOptions& options) {
  const AcceleratorInventory& inv = *a.inventory;
  std::vector<MigDeviceSpec> specs;
  MigFree room;
  if (geometry) {
    room.memory_slice.assign(geometry->memory_slices, true);
    room.compute = geometry->compute_slices;
  }
  for (size_t k = 0; k < inv.mig_instances.size(); ++k) {
    const MigInstance& m = inv.mig_instances[k];
    const MigProfile* p = geometry ? geometry->profile_by_id(m.profile_id) : nullptr;
    if (!p && geometry) p = geometry->profile(m.profile_name);
    MigDeviceSpec s;
    s.profile = p ? p->name : m.profile_name;
    s.start = m.placement_start;
    s.size = m.placement_size ? m.placement_size : (p ? p->memory_slices : 0);
    s.compute = p ? p->compute_slices : 0;
    s.memory_bytes = m.memory_bytes;
    s.instance = k;
    s.uuid = m.uuid;
    if (!p || s.size == 0 || s.start + s.size > room.memory_slice.size() ||
        s.compute > room.compute) {
      room.known = false;
    } else {
      for (unsigned j = s.start; j < s.start + s.size; ++j) {
        if (!room.memory_slice[j]) room.known = false;  // two instances on one slice: odd
        room.memory_slice[j] = false;
      }
      room.compute -= s.compute;
      if (s.profile.find("+me") != std::string::npos) room.media_extension = false;
    }
    specs.push_back(std::move(s));
  }
  const bool placements =
      options.mig == MigDevices::all && options.counters && geometry && room.known;
  if (placements) {
    for (const auto& p : geometry->profiles) {
      const bool me = p.name.find("+me") != std::string::npos;
      if (p.compute_slices > room.compute || (me && !room.media_extension)) continue;
      for (unsigned start : p.starts) {
        bool fits = start + p.memory_slices <= room.memory_slice.size();
        for (unsigned j = start; fits && j < start + p.memory_slices; ++j)
          fits = room.memory_slice[j];
        if (!fits) continue;  // an existing instance holds part of it (itself, if the same)
        MigDeviceSpec s;
        s.profile = p.name;
        s.start = start;
        s.size = p.memory_slices;
        s.compute = p.compute_slices;
        s.memory_bytes = p.memory_mib ? p.memory_mib * kMiB : p.memory_gb * kGiB;
        specs.push_back(std::move(s));
      }
    }
  }
  std::sort(specs.begin(), specs.end(), [](const MigDeviceSpec& x, const MigDeviceSpec& y) {
    return std::tie(x.size, x.profile, x.start) < std::tie(y.size, y.profile, y.start);
  });
  const bool any_placement =
      std::any_of(specs.begin(), specs.end(), [](const MigDeviceSpec& s) { return !s.instance; });
  if (any_placement) {
    // The counters the placements share: only what the existing instances leave room.
    CounterSet cs{parent.name + "-mig", {}};
    for (unsigned k = 0; k < room.memory_slice.size(); ++k)
      if (room.memory_slice[k]) cs.counters["memory-slice-" + std::to_string(k)] = "1";
    cs.counters["compute-slices"] = std::to_string(room.compute);
    if (room.media_extension) cs.counters["media-extensions"] = "1";
    unit.counters = std::move(cs);
  }
  for (const auto& s : specs) {
    Device d;
    d.kind = DeviceKind::mig;
    d.accelerator = index;
    d.mig_instance = s.instance;
    d.mig_profile = s.profile;
    d.mig_start = s.start;
    d.mig_size = s.size;
    d.name = parent.name + "-mig-" + label_part(s.profile) + "-s" + std::to_string(s.start);
    d.attributes = parent.attributes;
    d.attributes.erase("uuid");
    d.attributes["type"] = Attribute::of_string("mig");
    d.attributes["parentUUID"] = Attribute::of_string(inv.uuid);
    d.attributes["migProfile"] = Attribute::of_string(s.profile);
    d.attributes["migPlacementStart"] = Attribute::of_int(s.start);
    if (!s.uuid.empty()) d.attributes["uuid"] = Attribute::of_string(s.uuid);
    if (s.memory_bytes) d.capacity["memory"] = bytes_quantity(s.memory_bytes);
    d.taints = parent.taints;
    if (!s.instance && unit.counters) {
      CounterConsumption c{unit.counters->name, {}};
      for (unsigned k = s.start; k < s.start + s.size; ++k)
        add_counter(c, "memory-slice-" + std::to_string(k), 1);
      if (s.compute) add_counter(c, "compute-slices", s.compute);
      if (s.profile.find("+me") != std::string::npos) add_counter(c, "media-extensions", 1);
      d.consumes.push_back(std::move(c));
    }
    unit.devices.push_back(std::move(d));
  }
}

const MigGeometry* geometry_of(const Accelerator& a) {
  std::uint32_t pci_id = (static_cast<std::uint32_t>(a.pci.device_id) << 16) | a.pci.vendor_id;
  if (const MigGeometry* g = find_mig_geometry(pci_id)) return g;
  if (a.inventory && !a.inventory->product_name.empty())
    if (const MigGeometry* g = find_mig_geometry(a.inventory->product_name)) return g;
  return find_mig_geometry(a.name);
}

Unit accelerator_unit(const HostModel& model, size_t i, const SliceOptions& options,
                      const std::vector<std::optional<unsigned>>& nvlink,
                      const std::vector<std::optional<unsigned>>& xgmi) {
  const Accelerator& a = model.accelerators[i];
  Device d;
  d.kind = a.vendor == Vendor::intel_gaudi ? DeviceKind::hpu : DeviceKind::gpu;
  d.accelerator = i;
  d.name = gpu_name(a, i);
  auto numa = numa_node_of(model, a.pci.numa_nodes);
  add_pci_attributes(d, model, a.pci, numa);
  d.attributes["type"] = Attribute::of_string(to_string(d.kind));
  d.attributes["vendor"] = Attribute::of_string(to_string(a.vendor));
  d.attributes["index"] = Attribute::of_int(static_cast<std::int64_t>(i));
  std::string product =
      a.inventory && !a.inventory->product_name.empty() ? a.inventory->product_name : a.name;
  if (!product.empty()) d.attributes["product"] = Attribute::of_string(product);
  if (a.inventory) {
    const auto& inv = *a.inventory;
    if (!inv.uuid.empty()) d.attributes["uuid"] = Attribute::of_string(inv.uuid);
    if (!inv.driver_version.empty())
      d.attributes["driverVersion"] = Attribute::of_string(inv.driver_version);
    if (!inv.compute_capability.empty())
      d.attributes["computeCapability"] = Attribute::of_string(inv.compute_capability);
    if (!inv.gfx_version.empty())
      d.attributes["gfxVersion"] = Attribute::of_string(inv.gfx_version);
    if (inv.memory_total_bytes) d.capacity["memory"] = bytes_quantity(inv.memory_total_bytes);
  }
  if (nvlink[i]) d.attributes["nvlinkDomain"] = Attribute::of_int(*nvlink[i]);
  if (xgmi[i]) d.attributes["xgmiDomain"] = Attribute::of_int(*xgmi[i]);
  if (auto nn = nearest_nic(model, i)) {
    d.attributes["nicLinkLevel"] = Attribute::of_string(nn->first.label());
    d.attributes["nearestNIC"] = Attribute::of_string("nic-" + std::to_string(nn->second));
  }
  if (options.unhealthy.count(a.pci.address.to_string()))
    d.taints.push_back({kUnhealthyTaint, "true", "NoSchedule"});

  Unit unit;
  const AcceleratorInventory* inv = a.inventory ? &*a.inventory : nullptr;
  bool mig = a.vendor == Vendor::nvidia && inv && inv->mig_enabled.value_or(false);
  if (mig) {
    // In MIG mode the GPU is used through its instances only.
    const MigGeometry* g = geometry_of(a);
    add_mig_devices(unit, d, a, i, g, options);
    return unit;
  }
  if (a.vendor == Vendor::amd && a.partitions > 1) {
    CounterSet cs{d.name + "-partitions", {}};
    cs.counters["partitions"] = std::to_string(a.partitions);
    std::uint64_t total = inv ? inv->memory_total_bytes : 0;
    if (total) cs.counters["memory"] = bytes_quantity(total);
    for (unsigned k = 0; k < a.partitions; ++k) {
      Device p = d;
      p.kind = DeviceKind::gpu_partition;
      p.partition = k;
      p.name = d.name + "-part-" + std::to_string(k);
      p.attributes["type"] = Attribute::of_string("gpu-partition");
      p.attributes["partition"] = Attribute::of_int(k);
      if (inv && !inv->compute_partition.empty())
        p.attributes["computePartition"] = Attribute::of_string(inv->compute_partition);
      if (inv && !inv->memory_partition.empty())
        p.attributes["memoryPartition"] = Attribute::of_string(inv->memory_partition);
      p.capacity.clear();
      CounterConsumption c{cs.name, {{"partitions", "1"}}};
      if (total) {
        p.capacity["memory"] = bytes_quantity(total / a.partitions);
        c.counters["memory"] = bytes_quantity(total / a.partitions);
      }
      // The partitions exist and are devices of their own: without counters (a server that
      // drops them) none can be over-committed either.
      if (options.counters) p.consumes.push_back(std::move(c));
      unit.devices.push_back(std::move(p));
    }
    if (options.counters) unit.counters = std::move(cs);
    return unit;
  }
  unit.devices.push_back(std::move(d));
  return unit;
}

std::vector<Unit> nic_units(const HostModel& model, size_t k, unsigned shares) {
  const Nic& nic = model.nics[k];
  std::vector<Unit> out;
  Device d;
  d.kind = DeviceKind::nic;
  d.nic = k;
  d.name = "nic-" + std::to_string(k);
  add_pci_attributes(d, model, nic.pci, numa_node_of(model, nic.pci.numa_nodes));
  d.attributes["type"] = Attribute::of_string("nic");
  if (!nic.pci.vendor_name.empty())
    d.attributes["vendor"] = Attribute::of_string(nic.pci.vendor_name);
  std::string product = !nic.pci.device_name.empty() ? nic.pci.device_name : nic.name;
  if (!product.empty()) d.attributes["product"] = Attribute::of_string(product);
  if (!nic.fabric.empty()) d.attributes["fabric"] = Attribute::of_string(nic.fabric);
  if (!nic.rdma_devices.empty())
    d.attributes["rdmaDevice"] = Attribute::of_string(nic.rdma_devices.front());
  if (!nic.netdevs.empty()) d.attributes["netdev"] = Attribute::of_string(nic.netdevs.front());
  for (const auto& os : nic.pci.os_devices) {
    if (!os.node_guid.empty()) {
      d.attributes["nodeGUID"] = Attribute::of_string(os.node_guid);
      break;
    }
  }
  if (nic.pci.sriov) d.attributes["sriovTotalVFs"] = Attribute::of_int(nic.pci.sriov->total_vfs);
  if (shares > 0) {
    // Each allocation takes one share unless its request asks for more, at most all of them.
    d.allow_multiple_allocations = true;
    d.capacity[kSharesCapacity] = std::to_string(shares);
    d.request_policy[kSharesCapacity] = {"1", "1", std::to_string(shares), "1"};
  }
  Unit u;
  u.devices.push_back(d);
  out.push_back(std::move(u));
  if (!nic.pci.sriov) return out;
  for (size_t v = 0; v < nic.pci.sriov->vfs.size(); ++v) {
    const VirtualFunction& vf = nic.pci.sriov->vfs[v];
    Device f;
    f.kind = DeviceKind::vf;
    f.nic = k;
    f.vf = v;
    f.name = d.name + "-vf-" + std::to_string(vf.index);
    PciDevice pci = nic.pci;
    pci.address = vf.address;
    std::vector<unsigned> nodes;
    if (vf.numa_node) nodes.push_back(*vf.numa_node);
    add_pci_attributes(f, model, pci, vf.numa_node ? numa_node_of(model, nodes) : std::nullopt);
    f.attributes["type"] = Attribute::of_string("vf");
    for (const char* keep : {"vendor", "product", "fabric"})
      if (d.attributes.count(keep)) f.attributes[keep] = d.attributes.at(keep);
    f.attributes["physicalFunction"] = Attribute::of_string(nic.pci.address.to_string());
    f.attributes["vfIndex"] = Attribute::of_int(vf.index);
    if (!vf.rdma_devices.empty())
      f.attributes["rdmaDevice"] = Attribute::of_string(vf.rdma_devices.front());
    if (!vf.netdevs.empty()) f.attributes["netdev"] = Attribute::of_string(vf.netdevs.front());
    if (!vf.driver.empty()) f.attributes["driver"] = Attribute::of_string(vf.driver);
    Unit vu;
    vu.devices.push_back(std::move(f));
    out.push_back(std::move(vu));
  }
  return out;
}

size_t counter_total(const CounterSet& s) {
  return s.counters.size();
}

size_t consumed_total(const Device& d) {
  size_t n = 0;
  for (const auto& c : d.consumes)
    n += c.counters.size();
  return n;
}

struct SliceLoad {
  size_t devices = 0, shared = 0, consumed = 0;
  bool counters_or_taints = false;
  bool fits() const {
    size_t max_devices =
        counters_or_taints ? kMaxDevicesPerSliceWithCountersOrTaints : kMaxDevicesPerSlice;
    return devices <= max_devices && shared <= kMaxSharedCountersPerSlice &&
           consumed <= kMaxConsumedCountersPerSlice;
  }
};

SliceLoad load_of(const Unit& u) {
  SliceLoad l;
  l.devices = u.devices.size();
  if (u.counters) {
    l.shared = counter_total(*u.counters);
    l.counters_or_taints = true;
  }
  for (const auto& d : u.devices) {
    l.consumed += consumed_total(d);
    if (!d.taints.empty() || !d.consumes.empty()) l.counters_or_taints = true;
  }
  return l;
}

SliceLoad operator+(SliceLoad a, const SliceLoad& b) {
  a.devices += b.devices;
  a.shared += b.shared;
  a.consumed += b.consumed;
  a.counters_or_taints = a.counters_or_taints || b.counters_or_taints;
  return a;
}

json attribute_json(const Attribute& a) {
  switch (a.kind) {
    case Attribute::Kind::integer:
      return {{"int", a.integer}};
    case Attribute::Kind::boolean:
      return {{"bool", a.boolean}};
    case Attribute::Kind::version:
      return {{"version", a.text}};
    case Attribute::Kind::string:
      break;
  }
  return {{"string", a.text}};
}

json counters_json(const std::map<std::string, std::string>& counters) {
  json out = json::object();
  for (const auto& [name, value] : counters)
    out[name] = {{"value", value}};
  return out;
}

}  // namespace

Attribute Attribute::of_string(std::string v) {
  if (v.size() > kMaxAttributeValueLength) {
    v.resize(kMaxAttributeValueLength);
    // Do not leave half a UTF-8 sequence at the end.
    while (!v.empty() && (static_cast<unsigned char>(v.back()) & 0xC0) == 0x80)
      v.pop_back();
    if (!v.empty() && (static_cast<unsigned char>(v.back()) & 0x80)) v.pop_back();
  }
  return {Kind::string, 0, false, std::move(v)};
}

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::gpu:
      return "gpu";
    case DeviceKind::mig:
      return "mig";
    case DeviceKind::gpu_partition:
      return "gpu-partition";
    case DeviceKind::hpu:
      return "hpu";
    case DeviceKind::nic:
      return "nic";
    case DeviceKind::vf:
      return "vf";
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::memory:
      return "memory";
  }
  return "gpu";
}

bool is_dns_label(const std::string& t) {
  if (t.empty() || t.size() > kMaxDnsLabelLength) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(t.front()) || !alnum(t.back())) return false;
  return std::all_of(t.begin(), t.end(), [&](char c) { return alnum(c) || c == '-'; });
}

bool is_dns_subdomain(const std::string& t) {
  if (t.empty() || t.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = t.find('.', start);
    std::string part = t.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!is_dns_label(part)) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

std::string bytes_quantity(std::uint64_t bytes) {
  if (bytes && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + "Gi";
  if (bytes && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + "Mi";
  return std::to_string(bytes);
}

const Device* Pool::device(const std::string& name) const {
  for (const auto& s : slices)
    for (const auto& d : s.devices)
      if (d.name == name) return &d;
  return nullptr;
}

size_t Pool::device_count() const {
  size_t n = 0;
  for (const auto& s : slices)
    n += s.devices.size();
  return n;
}

const char* to_string(CounterLayout layout) {
  return layout == CounterLayout::own_slices ? "own-slices" : "with-devices";
}

namespace {

// What breaks a per-device limit of the layout's Kubernetes versions: nothing ("") or the limit.
std::string device_limit_broken(const Device& d, CounterLayout layout) {
  if (d.attributes.size() + d.capacity.size() > kMaxAttributesAndCapacities)
    return "32 attributes and capacities";
  if (d.taints.size() > kMaxTaintsPerDevice) return "4 taints";
  if (!is_dns_label(d.name)) return "a DNS label for a name";
  if (layout == CounterLayout::with_devices) {
    if (consumed_total(d) > kMaxConsumedCountersPerDevice) return "32 consumed counters";
  } else {
    if (d.consumes.size() > kMaxCounterSetsPerDevice) return "2 counter sets consumed";
    for (const auto& c : d.consumes)
      if (c.counters.size() > kMaxCountersPerConsumption) return "32 counters from one set";
  }
  return {};
}

// 1.35 and later: the counter sets in slices of their own (first, 8 a slice), then the devices,
// as many a slice as the device limit takes; a GPU's devices may be in two slices, the counters
// are the pool's.
Result<Pool> pack_counter_sets_apart(Pool pool, std::vector<Unit> units) {
  std::vector<CounterSet> sets;
  std::vector<Device> devices;
  for (auto& u : units) {
    if (u.counters) {
      if (u.counters->counters.size() > kMaxCountersPerCounterSet) {
        return Error{ErrorCode::unsupported,
                     "counter set " + u.counters->name,
                     "holds more than 32 counters, the most a counter set may have",
                     {}};
      }
      sets.push_back(std::move(*u.counters));
    }
    for (auto& d : u.devices)
      devices.push_back(std::move(d));
  }
  for (size_t i = 0; i < sets.size(); ++i) {
    if (i % kMaxCounterSetsPerSlice == 0) pool.slices.emplace_back();
    pool.slices.back().shared_counters.push_back(std::move(sets[i]));
  }
  size_t in_slice = 0;
  bool advanced = false;  // taints or counters in the current device slice
  for (auto& d : devices) {
    const bool a = !d.taints.empty() || !d.consumes.empty();
    const size_t max =
        advanced || a ? kMaxDevicesPerSliceWithCountersOrTaints : kMaxDevicesPerSlice;
    if (in_slice == 0 || in_slice + 1 > max) {
      pool.slices.emplace_back();
      in_slice = 0;
      advanced = false;
    }
    advanced = advanced || a;
    ++in_slice;
    pool.slices.back().devices.push_back(std::move(d));
  }
  return pool;
}

}  // namespace

Result<Pool> build_pool(const HostModel& model, const SliceOptions& options) {
  if (!is_dns_subdomain(options.node))
    return bad_input("node name \"" + options.node + "\"", "is not a DNS subdomain",
                     "give --node the Node's name as kubectl get nodes shows it");
  if (!is_dns_subdomain(options.driver))
    return bad_input("driver name \"" + options.driver + "\"", "is not a DNS subdomain");
  if (options.nic_shares == 1 || options.nic_shares > kMaxNicShares) {
    return bad_input("NIC shares " + std::to_string(options.nic_shares),
                     "must be 0 (NICs not shared) or 2 to " + std::to_string(kMaxNicShares));
  }
  auto nvlink = link_domains(model, LinkLevel::nvlink);
  auto xgmi = link_domains(model, LinkLevel::xgmi);
  std::vector<Unit> units;
  for (size_t i = 0; i < model.accelerators.size(); ++i) {
    const Accelerator& a = model.accelerators[i];
    if (a.vendor == Vendor::other) continue;
    if (options.withdraw_unhealthy && options.unhealthy.count(a.pci.address.to_string())) continue;
    units.push_back(accelerator_unit(model, i, options, nvlink, xgmi));
  }
  for (size_t k = 0; k < model.nics.size(); ++k) {
    if (!model.nics[k].rdma_capable()) continue;
    for (auto& u : nic_units(model, k, options.nic_shares))
      units.push_back(std::move(u));
  }
  // After the accelerators and NICs, so that adding CPUs keeps their places in the slices.
  for (auto& d : cpu_devices(model, options.cpu)) {
    Unit u;
    u.devices.push_back(std::move(d));
    units.push_back(std::move(u));
  }
  Pool pool{options.driver, options.node, {}};
  for (const auto& u : units) {
    for (const auto& d : u.devices) {
      std::string broken = device_limit_broken(d, options.layout);
      if (!broken.empty()) {
        return Error{ErrorCode::internal,
                     "device " + d.name,
                     "breaks a per-device limit of resource.k8s.io/v1 (" + broken + ")",
                     {}};
      }
    }
  }
  if (options.layout == CounterLayout::own_slices)
    return pack_counter_sets_apart(std::move(pool), std::move(units));
  SliceLoad current;
  for (auto& u : units) {
    SliceLoad l = load_of(u);
    if (!l.fits()) {
      return Error{ErrorCode::unsupported,
                   "device " + u.devices.front().name,
                   "its counter set and devices do not fit one ResourceSlice",
                   {}};
    }
    if (pool.slices.empty() || !(current + l).fits()) {
      pool.slices.emplace_back();
      current = SliceLoad{};
    }
    current = current + l;
    Slice& s = pool.slices.back();
    if (u.counters) s.shared_counters.push_back(std::move(*u.counters));
    for (auto& d : u.devices)
      s.devices.push_back(std::move(d));
  }
  return pool;
}

std::string slice_name(const Pool& pool, size_t index) {
  std::string suffix = "-polyaccel-" + std::to_string(index);
  std::string node = pool.node;
  if (node.size() + suffix.size() > 253) {
    // Cut, the cut marked by a hash of the whole node name: two long names that share their
    // first 230 characters must not name the same slices (each node would overwrite the other's).
    // FNV-1a, 64 bits: a name, not a secret; spec.nodeName and the admission policy decide whose
    // slice it is.
    std::uint64_t hash = 14695981039346656037ull;
    for (unsigned char c : pool.node) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
    static const char* hex = "0123456789abcdef";
    std::string mark = "-";
    for (int shift = 60; shift >= 0; shift -= 4)
      mark += hex[(hash >> shift) & 15];
    node = node.substr(0, 253 - suffix.size() - mark.size());
    while (!node.empty() && (node.back() == '.' || node.back() == '-'))
      node.pop_back();
    node += mark;
  }
  return node + suffix;
}

nlohmann::json slice_json(const Pool& pool, size_t index, std::int64_t generation) {
  const Slice& s = pool.slices.at(index);
  json spec;
  spec["driver"] = pool.driver;
  spec["nodeName"] = pool.node;
  spec["pool"] = {{"name", pool.node},
                  {"generation", generation},
                  {"resourceSliceCount", static_cast<std::int64_t>(pool.slices.size())}};
  json devices = json::array();
  for (const auto& d : s.devices) {
    json dj;
    dj["name"] = d.name;
    if (!d.attributes.empty()) {
      json attrs = json::object();
      for (const auto& [k, v] : d.attributes)
        attrs[k] = attribute_json(v);
      dj["attributes"] = std::move(attrs);
    }
    if (!d.capacity.empty()) dj["capacity"] = counters_json(d.capacity);
    for (const auto& [name, p] : d.request_policy) {
      if (!dj.contains("capacity") || !dj["capacity"].contains(name)) continue;
      dj["capacity"][name]["requestPolicy"] = {
          {"default", p.default_value},
          {"validRange", {{"min", p.min}, {"max", p.max}, {"step", p.step}}}};
    }
    if (d.allow_multiple_allocations) dj["allowMultipleAllocations"] = true;
    if (!d.consumes.empty()) {
      json cc = json::array();
      for (const auto& c : d.consumes)
        cc.push_back({{"counterSet", c.counter_set}, {"counters", counters_json(c.counters)}});
      dj["consumesCounters"] = std::move(cc);
    }
    if (!d.taints.empty()) {
      json tj = json::array();
      for (const auto& t : d.taints)
        tj.push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
      dj["taints"] = std::move(tj);
    }
    devices.push_back(std::move(dj));
  }
  if (!s.devices.empty() || s.shared_counters.empty()) spec["devices"] = std::move(devices);
  if (!s.shared_counters.empty()) {
    json sc = json::array();
    for (const auto& c : s.shared_counters)
      sc.push_back({{"name", c.name}, {"counters", counters_json(c.counters)}});
    spec["sharedCounters"] = std::move(sc);
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", slice_name(pool, index)}}},
          {"spec", std::move(spec)}};
}

void monitored_ids(const HostModel& model, const Pool& pool,
                   std::map<std::string, std::vector<std::string>>& out) {
  for (const auto& slice : pool.slices) {
    for (const auto& d : slice.devices) {
      if (d.accelerator >= model.accelerators.size()) continue;
      const Accelerator& a = model.accelerators[d.accelerator];
      if (d.kind == DeviceKind::gpu || d.kind == DeviceKind::hpu) {
        out[d.name].push_back(a.pci.address.to_string());
      } else if (d.kind == DeviceKind::mig && d.mig_instance && a.inventory &&
                 *d.mig_instance < a.inventory->mig_instances.size()) {
        const std::string& uuid = a.inventory->mig_instances[*d.mig_instance].uuid;
        if (!uuid.empty()) out[d.name].push_back(uuid);
      }
    }
  }
}

}  // namespace polyaccel::dra
