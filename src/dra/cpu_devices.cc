#include "dra/cpu_devices.h"

#include <algorithm>

#include "core/strings.h"

namespace polyaccel::dra {

namespace {

const NumaNode* cpu_node_of(const HostModel& model, unsigned cpu) {
  for (const auto& n : model.numa_nodes)
    if (n.kind == NumaKind::dram && n.cpus.test(cpu)) return &n;
  return nullptr;
}

std::optional<unsigned> package_of_node(const HostModel& model, unsigned node) {
  for (const auto& p : model.packages)
    if (std::find(p.numa_nodes.begin(), p.numa_nodes.end(), node) != p.numa_nodes.end())
      return p.os_index;
  return std::nullopt;
}

void add_topology(Device& d, const HostModel& model, unsigned node) {
  d.numa_node = node;
  d.attributes[std::string(kStandardPrefix) + "numaNode"] = Attribute::of_int(node);
  if (auto pkg = package_of_node(model, node)) d.attributes["package"] = Attribute::of_int(*pkg);
}

void add_cpus(Device& d, const CpuSet& cpus) {
  d.cpus = cpus;
  d.capacity["cpus"] = std::to_string(cpus.count());
  // A cut list would name CPUs it does not hold: left out when it is too long.
  std::string list = cpus.to_list();
  if (list.size() <= kMaxAttributeValueLength) d.attributes["cpus"] = Attribute::of_string(list);
}

}  // namespace

const char* to_string(CpuGrain grain) {
  switch (grain) {
    case CpuGrain::off:
      return "off";
    case CpuGrain::core:
      return "core";
    case CpuGrain::numa:
      return "numa";
  }
  return "off";
}

std::vector<Device> cpu_devices(const HostModel& model, const CpuDeviceOptions& options) {
  std::vector<Device> out;
  // The offered cores of each node, by node, in CPU order.
  std::map<unsigned, std::vector<const Core*>> cores;
  if (options.grain != CpuGrain::off) {
    std::vector<const Core*> sorted;
    for (const auto& c : model.cores)
      if (!c.pus.empty() && !c.pus.intersects(options.reserved)) sorted.push_back(&c);
    std::sort(sorted.begin(), sorted.end(),
              [](const Core* a, const Core* b) { return *a->pus.first() < *b->pus.first(); });
    for (const Core* c : sorted)
      if (const NumaNode* n = cpu_node_of(model, *c->pus.first())) cores[n->os_index].push_back(c);
  }
  for (const auto& node : model.numa_nodes) {
    if (node.kind != NumaKind::dram) continue;
    const auto& mine = cores[node.os_index];
    if (options.grain == CpuGrain::core) {
      for (const Core* c : mine) {
        Device d;
        d.kind = DeviceKind::cpu;
        d.name = "cpu-" + std::to_string(*c->pus.first());
        d.attributes["type"] = Attribute::of_string("cpu");
        add_topology(d, model, node.os_index);
        d.attributes["smtSiblings"] = Attribute::of_int(c->pus.count());
        // Cores that share an L3 (one CCX): matchAttribute on it keeps a claim's cores there.
        if (c->l3_cache) d.attributes["l3Cache"] = Attribute::of_int(*c->l3_cache);
        add_cpus(d, c->pus);
        out.push_back(std::move(d));
      }
    } else if (options.grain == CpuGrain::numa && !mine.empty()) {
      Device d;
      d.kind = DeviceKind::cpu;
      d.name = "cpu-numa-" + std::to_string(node.os_index);
      d.attributes["type"] = Attribute::of_string("cpu-numa");
      add_topology(d, model, node.os_index);
      CpuSet cpus;
      for (const Core* c : mine)
        cpus |= c->pus;
      d.attributes["cores"] = Attribute::of_int(static_cast<std::int64_t>(mine.size()));
      add_cpus(d, cpus);
      out.push_back(std::move(d));
    }
    if (options.memory && node.memory_bytes && !node.cpus.empty()) {
      Device d;
      d.kind = DeviceKind::memory;
      d.name = "memory-numa-" + std::to_string(node.os_index);
      d.attributes["type"] = Attribute::of_string("memory");
      add_topology(d, model, node.os_index);
      d.capacity["memory"] = bytes_quantity(node.memory_bytes);
      for (const auto& h : node.hugepages)
        if (h.size_bytes && h.total)
          d.capacity["hugepages" + bytes_quantity(h.size_bytes)] =
              bytes_quantity(h.size_bytes * h.total);
      out.push_back(std::move(d));
    }
  }
  return out;
}

CpuGrant grant_of(const HostModel& model, const std::vector<const Device*>& devices) {
  CpuGrant g;
  CpuSet cpu_nodes;
  for (const Device* d : devices) {
    if (d->kind == DeviceKind::cpu) {
      g.cpus |= d->cpus;
      cpu_nodes.set(d->numa_node);
    } else if (d->kind == DeviceKind::memory) {
      g.mems.set(d->numa_node);
      if (const NumaNode* n = model.numa_node(d->numa_node))
        for (const auto& h : n->hugepages)
          if (h.size_bytes && h.total) g.hugepage_bytes[h.size_bytes] += h.size_bytes * h.total;
    }
  }
  if (g.mems.empty()) g.mems = cpu_nodes;
  return g;
}

Result<CpuGrant> claim_grant(const HostModel& model, const CpuDeviceOptions& options,
                             const std::vector<std::string>& device_names) {
  const std::vector<Device> all = cpu_devices(model, options);
  std::vector<const Device*> chosen;
  for (const auto& name : device_names) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Device& d) { return d.name == name; });
    if (it == all.end()) {
      return bad_input("device " + printable(name.substr(0, 64)),
                       "is not a CPU or memory device of this node (--dra-cpus " +
                           std::string(to_string(options.grain)) +
                           (options.memory ? ", --dra-memory" : "") + ")");
    }
    chosen.push_back(&*it);
  }
  return grant_of(model, chosen);
}

void cpu_holdings(const HostModel& model, const Pool& pool, const std::vector<HeldDevices>& claims,
                  std::vector<DraStatus::ClaimHolding>& holdings,
                  std::map<unsigned, unsigned>& free_cpus) {
  std::map<unsigned, CpuSet> offered;  // by node
  for (const auto& s : pool.slices)
    for (const auto& d : s.devices)
      if (d.kind == DeviceKind::cpu) offered[d.numa_node] |= d.cpus;
  for (const auto& c : claims) {
    std::map<unsigned, DraStatus::ClaimHolding> mine;  // by node
    for (const auto& name : c.devices) {
      const Device* d = pool.device(name);
      if (!d || (d->kind != DeviceKind::cpu && d->kind != DeviceKind::memory)) continue;
      DraStatus::ClaimHolding& h = mine[d->numa_node];
      h.ns = c.ns;
      h.name = c.name;
      h.numa_node = d->numa_node;
      if (d->kind == DeviceKind::cpu) {
        h.cpus += d->cpus.count();
        offered[d->numa_node] = offered[d->numa_node] - d->cpus;
      } else if (const NumaNode* n = model.numa_node(d->numa_node)) {
        h.memory_bytes += n->memory_bytes;
      }
    }
    for (auto& [node, h] : mine)
      holdings.push_back(std::move(h));
  }
  for (const auto& [node, cpus] : offered)
    free_cpus[node] = cpus.count();
}

Result<CpuSet> parse_reserved_cpus(const HostModel& model, const std::string& text) {
  auto set = CpuSet::parse_list(text);
  if (!set) {
    return bad_input("--reserved-cpus " + printable(text.substr(0, 64)),
                     "is not a CPU list (kubelet's reservedSystemCPUs syntax: 0-1,64-65)");
  }
  if (!model.pus.contains(*set)) {
    return bad_input("--reserved-cpus " + printable(text.substr(0, 64)),
                     "names CPUs this node does not have (" + (*set - model.pus).to_list() +
                         "; it has " + model.pus.to_list() + ")");
  }
  return *set;
}

}  // namespace polyaccel::dra
