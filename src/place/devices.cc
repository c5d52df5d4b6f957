#include "place/devices.h"

#include <algorithm>
#include <set>

#include "core/strings.h"

namespace polyaccel::place {

LinkLevel link_level(NicAffinity affinity) {
  switch (affinity) {
    case NicAffinity::pix:
      return LinkLevel::pix;
    case NicAffinity::pxb:
      return LinkLevel::pxb;
    case NicAffinity::phb:
      return LinkLevel::phb;
    case NicAffinity::node:
      return LinkLevel::node;
    case NicAffinity::none:
      break;
  }
  return LinkLevel::sys;
}

unsigned DeviceChoice::stranded_accelerators_on(const HostView& host, const HostUsage& usage,
                                                unsigned node) const {
  unsigned n = 0;
  for (size_t i = 0; i < host.devices.size(); ++i) {
    const HostDevice& d = host.devices[i];
    if (!d.accelerator || d.numa_node != node || usage.devices.count(d.pci_bus_id)) continue;
    bool taken =
        std::any_of(chosen.begin(), chosen.end(), [&](const auto& c) { return c.first == i; });
    n += taken ? 0 : 1;
  }
  return n;
}

namespace {

// Where a device sits relative to the guest: Nova's pools in the order it prefers them.
enum Locality : unsigned { local = 0, no_numa = 1, same_socket = 2, remote = 3 };

struct Context {
  const HostView& host;
  const HostUsage& usage;
  const Request& request;
  const std::vector<unsigned>& nodes;
  Strategy strategy;
  std::set<unsigned> sockets;
  bool every_node_has_socket = true;
  std::vector<bool> taken;

  Locality locality(const HostDevice& d) const {
    if (nodes.empty()) return local;  // no guest NUMA topology: every device will do
    if (!d.numa_node) return no_numa;
    if (std::find(nodes.begin(), nodes.end(), *d.numa_node) != nodes.end()) return local;
    if (d.socket && sockets.count(*d.socket)) return same_socket;
    return remote;
  }

  std::string nodes_text() const {
    std::vector<std::string> parts;
    for (unsigned n : nodes)
      parts.push_back(std::to_string(n));
    return join(parts, ",");
  }

  // Nova's _filter_pools_for_numa_cells: the devices a policy allows for `count` devices.
  std::vector<size_t> allowed(const std::vector<size_t>& candidates, PciNumaPolicy policy,
                              unsigned count) const {
    std::vector<size_t> locals;
    for (size_t i : candidates) {
      if (locality(host.devices[i]) == local) locals.push_back(i);
    }
    if (nodes.empty()) return candidates;
    if (policy == PciNumaPolicy::required || locals.size() >= count) return locals;
    std::vector<size_t> out;
    for (size_t i : candidates) {
      Locality l = locality(host.devices[i]);
      bool ok = l == local;
      if (policy == PciNumaPolicy::legacy) ok = ok || l == no_numa;
      if (policy == PciNumaPolicy::preferred) ok = true;
      if (policy == PciNumaPolicy::socket) ok = ok || (l == same_socket && every_node_has_socket);
      if (ok) out.push_back(i);
    }
    return out;
  }

  // Why a device cannot be given: a function of its IOMMU group is in use (vfio hands a guest
  // the whole group or nothing); empty when the group is free.
  std::string group_conflict(const HostDevice& d) const {
    std::vector<std::string> busy;
    for (const auto& other : host.group_companions(d.pci)) {
      const std::string id = other.to_string();
      if (usage.devices.count(id)) busy.push_back(id);
    }
    if (busy.empty()) return {};
    return d.id + " (" + d.pci_bus_id + ") shares IOMMU group " +
           std::to_string(*d.pci.iommu_group) + " with " + join(busy, ", ") +
           ", in use by another guest";
  }

  // Devices the fit knows that would go to the guest only as a device's group companions.
  unsigned companions_wasted(const HostDevice& d) const {
    unsigned n = 0;
    for (const auto& other : host.group_companions(d.pci)) {
      if (host.device(other.to_string())) ++n;
    }
    return n;
  }

  bool has_close_free_nic(size_t accel) const {
    const LinkLevel limit = link_level(request.nic_affinity);
    for (size_t i = 0; i < host.devices.size(); ++i) {
      const HostDevice& d = host.devices[i];
      if (d.accelerator || !d.rdma || taken[i] || usage.devices.count(d.pci_bus_id)) continue;
      if (host.link(accel, i) <= limit) return true;
    }
    return false;
  }
};

// Every other endpoint of a chosen device's IOMMU group goes with it, once.
void add_group_companions(const HostView& host, DeviceChoice& out) {
  std::set<std::string> given;
  for (const auto& [index, alias] : out.chosen)
    given.insert(host.devices[index].pci_bus_id);
  for (const auto& [index, alias] : out.chosen) {
    const HostDevice& d = host.devices[index];
    for (const auto& other : host.group_companions(d.pci)) {
      const std::string id = other.to_string();
      if (!given.insert(id).second) continue;
      GroupCompanion c;
      c.pci_bus_id = id;
      for (size_t i = 0; i < host.devices.size(); ++i) {
        if (host.devices[i].pci_bus_id == id) c.device = i;
      }
      c.with = index;
      c.group = *d.pci.iommu_group;
      out.companions.push_back(std::move(c));
    }
  }
}

std::string policy_text(PciNumaPolicy p) {
  return std::string("policy ") + to_string(p);
}

}  // namespace

bool too_few_free_devices(const HostView& host, const HostUsage& usage, const Request& request) {
  auto free = [&](const HostDevice& d) { return !usage.devices.count(d.pci_bus_id); };
  for (const auto& want : request.devices) {
    size_t n = 0;
    for (const auto& d : host.devices)
      n += free(d) && want.alias.matches(d.pci) ? 1 : 0;
    if (n < want.count) return true;
  }
  // Without polyaccel:rdma_nics, one NIC per accelerator: at least the devices of aliases that
  // match only accelerators here.
  size_t wanted = request.rdma_nics;
  if (!request.rdma_nics_given && request.nic_affinity != NicAffinity::none) {
    wanted = 0;
    for (const auto& want : request.devices) {
      bool accelerators_only = true;
      for (const auto& d : host.devices)
        accelerators_only = accelerators_only && (!want.alias.matches(d.pci) || d.accelerator);
      wanted += accelerators_only ? want.count : 0;
    }
  }
  size_t nics = 0;
  for (const auto& d : host.devices)
    nics += free(d) && d.rdma && !d.accelerator ? 1 : 0;
  return nics < wanted;
}

DeviceChoice choose_devices(const HostView& host, const HostUsage& usage, const Request& request,
                            const std::vector<unsigned>& nodes, Strategy strategy) {
  DeviceChoice out;
  Context cx{host, usage, request, nodes, strategy, {}, true, {}};
  cx.taken.assign(host.devices.size(), false);
  for (unsigned n : nodes) {
    const HostCell* c = host.cell(n);
    if (c && c->socket) {
      cx.sockets.insert(*c->socket);
    } else {
      cx.every_node_has_socket = false;
    }
  }
  std::set<std::string> switches;  // of the devices chosen so far
  std::vector<size_t> partners;    // the accelerators chosen so far
  std::vector<size_t> alias_nics;  // RDMA NICs chosen through an alias
  std::vector<std::string> group_blocked;
  auto not_offered = [&]() {
    return group_blocked.empty() ? std::string() : "; not offered: " + join(group_blocked, "; ");
  };
  for (const auto& want : request.devices) {
    std::vector<size_t> candidates;
    for (size_t i = 0; i < host.devices.size(); ++i) {
      const HostDevice& d = host.devices[i];
      if (cx.taken[i] || usage.devices.count(d.pci_bus_id) || !want.alias.matches(d.pci)) continue;
      if (std::string why = cx.group_conflict(d); !why.empty()) {
        group_blocked.push_back(why);
        continue;
      }
      candidates.push_back(i);
    }
    const PciNumaPolicy policy =
        request.pci_numa_policy.value_or(want.alias.numa_policy.value_or(PciNumaPolicy::legacy));
    std::vector<size_t> pool = cx.allowed(candidates, policy, want.count);
    if (pool.size() < want.count) {
      out.reason = "pci_passthrough:alias " + want.alias.name + ":" + std::to_string(want.count) +
                   " needs " + std::to_string(want.count) + " free devices";
      if (!nodes.empty())
        out.reason += " allowed by " + policy_text(policy) + " for host NUMA nodes " +
                      cx.nodes_text() + ": " + std::to_string(pool.size()) + " there";
      out.reason += ", " + std::to_string(candidates.size()) + " free on the host" + not_offered();
      return out;
    }
    for (unsigned k = 0; k < want.count; ++k) {
      auto key = [&](size_t i) {
        const HostDevice& d = host.devices[i];
        unsigned l = cx.locality(d);
        if (strategy == Strategy::first_fit) return std::make_tuple(l, 0u, 0u, 0u, i);
        unsigned apart = switches.empty() || switches.count(d.switch_key) ? 0u : 1u;
        unsigned no_nic = request.rdma_nics && request.nic_affinity != NicAffinity::none &&
                                  d.accelerator && !cx.has_close_free_nic(i)
                              ? 1u
                              : 0u;
        // An RDMA NIC asked for by alias serves the next accelerator chosen: the closest first.
        if (!d.accelerator && d.rdma && !partners.empty())
          no_nic =
              static_cast<unsigned>(host.link(partners[alias_nics.size() % partners.size()], i));
        return std::make_tuple(l, no_nic, cx.companions_wasted(d), apart, i);
      };
      size_t pick = pool.size();
      for (size_t j = 0; j < pool.size(); ++j) {
        if (cx.taken[pool[j]]) continue;
        if (pick == pool.size() || key(pool[j]) < key(pool[pick])) pick = j;
      }
      size_t index = pool[pick];
      cx.taken[index] = true;
      out.penalty += cx.locality(host.devices[index]);
      if (!host.devices[index].switch_key.empty()) switches.insert(host.devices[index].switch_key);
      out.chosen.emplace_back(index, want.alias.name);
      const HostDevice& d = host.devices[index];
      if (d.accelerator) partners.push_back(index);
      if (!d.accelerator && d.rdma) alias_nics.push_back(index);
    }
  }
  const bool affinity = request.nic_affinity != NicAffinity::none;
  const std::vector<size_t>& accelerators = partners;
  // RDMA NICs given through an alias count toward polyaccel:rdma_nics (one per accelerator
  // without it) and keep polyaccel:nic_affinity like the NICs chosen below.
  const unsigned wanted = request.rdma_nics_given || !affinity
                              ? request.rdma_nics
                              : static_cast<unsigned>(accelerators.size());
  if (affinity && accelerators.empty()) {
    out.reason = "polyaccel:nic_affinity needs an accelerator among the requested devices";
    return out;
  }
  if (affinity) {
    const LinkLevel limit = link_level(request.nic_affinity);
    for (size_t k = 0; k < alias_nics.size(); ++k) {
      const size_t partner = accelerators[k % accelerators.size()];
      const HostDevice& nic = host.devices[alias_nics[k]];
      if (host.link(partner, alias_nics[k]) > limit) {
        out.reason = "polyaccel:nic_affinity=" + std::string(to_string(request.nic_affinity)) +
                     ": " + nic.id + " (" + nic.pci_bus_id + ") is not within " + to_string(limit) +
                     " of " + host.devices[partner].id;
        return out;
      }
    }
  }
  if (wanted <= alias_nics.size()) {
    add_group_companions(host, out);
    out.ok = true;
    return out;
  }
  std::vector<size_t> candidates;
  for (size_t i = 0; i < host.devices.size(); ++i) {
    const HostDevice& d = host.devices[i];
    if (d.accelerator || !d.rdma || cx.taken[i] || usage.devices.count(d.pci_bus_id)) continue;
    if (std::string why = cx.group_conflict(d); !why.empty()) {
      group_blocked.push_back(why);
      continue;
    }
    candidates.push_back(i);
  }
  const PciNumaPolicy policy = request.pci_numa_policy.value_or(PciNumaPolicy::legacy);
  std::vector<size_t> pool =
      cx.allowed(candidates, policy, wanted - static_cast<unsigned>(alias_nics.size()));
  const LinkLevel limit = link_level(request.nic_affinity);
  for (unsigned k = static_cast<unsigned>(alias_nics.size()); k < wanted; ++k) {
    std::optional<size_t> partner;
    if (!accelerators.empty()) partner = accelerators[k % accelerators.size()];
    size_t pick = pool.size();
    auto key = [&](size_t i) {
      LinkLevel level = partner ? host.link(*partner, i) : LinkLevel::sys;
      unsigned l = cx.locality(host.devices[i]);
      if (strategy == Strategy::first_fit) return std::make_tuple(0u, l, i);
      return std::make_tuple(static_cast<unsigned>(level), l, i);
    };
    for (size_t j = 0; j < pool.size(); ++j) {
      size_t i = pool[j];
      if (cx.taken[i]) continue;
      if (affinity && host.link(*partner, i) > limit) continue;
      if (pick == pool.size() || key(i) < key(pool[pick])) pick = j;
    }
    if (pick == pool.size()) {
      out.reason =
          "polyaccel:rdma_nics=" + std::to_string(request.rdma_nics) + ": no free RDMA NIC";
      if (affinity)
        out.reason += " within " + std::string(to_string(limit)) + " of " +
                      host.devices[*partner].id + " (" + host.devices[*partner].pci_bus_id + ")";
      if (!nodes.empty()) out.reason += " allowed by " + policy_text(policy);
      out.reason +=
          "; " + std::to_string(candidates.size()) + " RDMA NICs free on the host" + not_offered();
      return out;
    }
    size_t index = pool[pick];
    cx.taken[index] = true;
    out.penalty += cx.locality(host.devices[index]);
    if (partner) out.penalty += static_cast<unsigned>(host.link(*partner, index));
    out.chosen.emplace_back(index, "rdma_nic");
  }
  add_group_companions(host, out);
  out.ok = true;
  return out;
}

}  // namespace polyaccel::place
