#include "place/fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_set>

#include "core/byte_size.h"
#include "place/devices.h"

namespace polyaccel::place {

namespace {

std::string node_name(const HostCell& hc) {
  return "node " + std::to_string(hc.node);
}

// One guest cell placed on one host cell, or what that host cell lacked.
struct CellFit {
  bool ok = false;
  std::string lack;
  bool short_of_pages = false;  // lack is of huge pages
  CellPlacement cell;
  CpuSet held;
  std::optional<unsigned> emulator_pu;
  // What the cell has left afterwards, as shares of what it has: CPUs (dedicated or shared
  // capacity) and memory. Their sum measures fit (smaller: tighter); their difference measures
  // how much of one resource would be stranded behind the other. Kept as whole numbers, set
  // once by set_left: the search reads them at every step.
  unsigned imbalance_pct = 0;
  std::uint64_t left_ppm = 0;
  bool was_empty = false;  // nothing of the cell was in use before
  void set_left(double cpu_left, double memory_left) {
    imbalance_pct = static_cast<unsigned>(std::abs(cpu_left - memory_left) * 100);
    left_ppm = static_cast<std::uint64_t>((cpu_left + memory_left) * 1e6);
  }
};

CellFit lacking(const HostCell& hc, const std::string& what) {
  CellFit f;
  f.lack = node_name(hc) + ": " + what;
  return f;
}

// Nova's page size choice for one cell; sets the page size on success.
bool fit_pages(const HostCell& hc, const CellUsage& u, const Request& r, std::uint64_t memory,
               CellPlacement& out, std::string& lack) {
  const PagePool& base = hc.pools[0];
  auto free_bytes = [&](size_t k) {
    std::uint64_t used = u.pages_used[k];
    return (hc.pools[k].total > used ? hc.pools[k].total - used : 0) * hc.pools[k].size_bytes;
  };
  auto need = [&](std::uint64_t have, const std::string& kind) {
    lack = "needs " + format_byte_size(memory) + " in " + kind + ", has " + format_byte_size(have) +
           " free";
    return false;
  };
  switch (r.page_size) {
    case PageSizeRequest::none:
      // Checked against all (not free) base pages: Nova lets unpinned memory overcommit here.
      if (memory > base.total * base.size_bytes) {
        lack = "needs " + format_byte_size(memory) + " of " + format_byte_size(base.size_bytes) +
               " pages, has " + format_byte_size(base.total * base.size_bytes) +
               (hc.pools.size() > 1 && std::any_of(hc.pools.begin() + 1, hc.pools.end(),
                                                   [](const PagePool& p) { return p.total > 0; })
                    ? " (the rest is huge pages)"
                    : "");
        return false;
      }
      out.page_size_bytes = 0;
      return true;
    case PageSizeRequest::small:
      if (free_bytes(0) < memory)
        return need(free_bytes(0), format_byte_size(base.size_bytes) + " pages");
      out.page_size_bytes = base.size_bytes;
      return true;
    case PageSizeRequest::exact:
      for (size_t k = 0; k < hc.pools.size(); ++k) {
        if (hc.pools[k].size_bytes != r.page_size_bytes) continue;
        if (memory % r.page_size_bytes != 0) {
          lack = format_byte_size(memory) + " is not a whole number of " +
                 format_byte_size(r.page_size_bytes) + " pages";
          return false;
        }
        if (free_bytes(k) < memory)
          return need(free_bytes(k), format_byte_size(r.page_size_bytes) + " pages");
        out.page_size_bytes = r.page_size_bytes;
        return true;
      }
      lack = "has no " + format_byte_size(r.page_size_bytes) + " page pool";
      return false;
    case PageSizeRequest::large:
    case PageSizeRequest::any: {
      // Largest first; "large" never falls back to the base page.
      size_t lowest = r.page_size == PageSizeRequest::large ? 1 : 0;
      std::string have;
      for (size_t k = hc.pools.size(); k-- > lowest;) {
        if (memory % hc.pools[k].size_bytes == 0 && free_bytes(k) >= memory) {
          out.page_size_bytes = hc.pools[k].size_bytes;
          return true;
        }
        if (!have.empty()) have += ", ";
        have += format_byte_size(free_bytes(k)) + " of " + format_byte_size(hc.pools[k].size_bytes);
      }
      lack = "needs " + format_byte_size(memory) + " in " +
             (r.page_size == PageSizeRequest::large ? "huge pages" : "pages of one size") +
             ", has " + (have.empty() ? std::string("no huge page pool") : have + " free");
      return false;
    }
  }
  return false;
}

// Nova's _pack_instance_onto_cores on the free threads of each core; returns the PUs in vCPU
// order followed by the emulator PU when one is reserved. Among the cores Nova's rule allows,
// polyaccel takes the ones with the fewest free threads first, so whole cores stay free.
// The free threads of each core of a cell, in one buffer: core c's are pus[start[c]..start[c+1]).
struct FreeThreads {
  std::vector<unsigned> pus;
  std::vector<size_t> start;
  FreeThreads(const HostCell& hc, const CpuSet& held) {
    start.reserve(hc.cores.size() + 1);
    start.push_back(0);
    for (const auto& core : hc.cores) {
      core.append_without(held, pus);
      start.push_back(pus.size());
    }
  }
  size_t cores() const { return start.size() - 1; }
  size_t size(size_t c) const { return start[c + 1] - start[c]; }
  unsigned at(size_t c, size_t t) const { return pus[start[c] + t]; }
};

std::optional<std::vector<unsigned>> pack(const HostCell& hc, const CpuSet& held, unsigned want,
                                          const Request& r, bool legacy, Strategy strategy,
                                          CpuSet& holds, std::string& lack) {
  const FreeThreads free_threads(hc, held);
  const unsigned tpc = hc.threads_per_core;
  if (r.thread_policy == ThreadPolicy::isolate && tpc > 1) {
    if (!legacy) {
      lack =
          "hw:cpu_thread_policy=isolate cannot use a cell with SMT siblings when "
          "cpu_dedicated_set is configured (Nova's guard for bug 1889633)";
      return std::nullopt;
    }
    std::vector<unsigned> chain;
    for (size_t c = 0; c < hc.cores.size() && chain.size() < want; ++c) {
      if (free_threads.size(c) != hc.cores[c].count()) continue;
      chain.push_back(free_threads.at(c, 0));
      holds |= hc.cores[c];  // a legacy host's claim marks the siblings used too
    }
    if (chain.size() < want) {
      lack = "hw:cpu_thread_policy=isolate needs " + std::to_string(want) +
             " cores with every thread free, has " + std::to_string(chain.size());
      return std::nullopt;
    }
    return chain;
  }
  const unsigned lowest_k = r.thread_policy == ThreadPolicy::require ? 2 : 1;
  if (tpc < lowest_k) {
    lack = "hw:cpu_thread_policy=require needs SMT siblings, the cell has one thread per core";
    return std::nullopt;
  }
  for (unsigned k = tpc; k >= lowest_k; --k) {
    std::vector<size_t> candidates;
    for (size_t c = 0; c < free_threads.cores(); ++c) {
      if (free_threads.size(c) >= k) candidates.push_back(c);
    }
    if (candidates.size() * k < want) continue;
    std::vector<unsigned> chain;
    chain.reserve(want);
    auto take = [&](size_t c) {  // true once the chain is complete
      for (unsigned t = 0; t < k && chain.size() < want; ++t)
        chain.push_back(free_threads.at(c, t));
      return chain.size() == want;
    };
    if (strategy == Strategy::polyaccel) {
      // Cores with the fewest free threads first, in host order among equals: one pass per
      // count (a core has at most threads_per_core), no sorted copy to allocate.
      bool done = false;
      for (size_t n = k; n <= tpc && !done; ++n) {
        for (size_t c : candidates) {
          if (free_threads.size(c) == n && take(c)) {
            done = true;
            break;
          }
        }
      }
    } else {
      for (size_t c : candidates) {
        if (take(c)) break;
      }
    }
    for (unsigned pu : chain)
      holds.set(pu);
    return chain;
  }
  if (r.thread_policy == ThreadPolicy::require) {
    size_t pairs = 0;
    for (size_t c = 0; c < free_threads.cores(); ++c)
      pairs += free_threads.size(c) >= 2 ? 1 : 0;
    lack = "hw:cpu_thread_policy=require needs " + std::to_string((want + 1) / 2) +
           " cores with at least 2 free siblings, has " + std::to_string(pairs);
    return std::nullopt;
  }
  std::vector<unsigned> chain;  // last resort: every free thread as its own core
  for (size_t c = 0; c < free_threads.cores(); ++c) {
    for (size_t t = 0; t < free_threads.size(c); ++t) {
      if (chain.size() < want) chain.push_back(free_threads.at(c, t));
    }
  }
  if (chain.size() < want) {
    lack = "needs " + std::to_string(want) + " free dedicated PUs, has " +
           std::to_string(chain.size());
    return std::nullopt;
  }
  for (unsigned pu : chain)
    holds.set(pu);
  return chain;
}

CellFit fit_cell(const HostView& host, size_t h, const CellUsage& u, const Request& r, unsigned g,
                 bool reserve_emulator, Strategy strategy) {
  const HostCell& hc = host.cells[h];
  const GuestCell& gc = r.cells[g];
  std::vector<unsigned> pinned, shared;
  for (unsigned v : gc.vcpus)
    (r.pinned_vcpus.test(v) ? pinned : shared).push_back(v);
  const bool pins = r.cpu_policy != CpuPolicy::shared;
  const unsigned want = static_cast<unsigned>(pinned.size()) + (reserve_emulator ? 1u : 0u);

  CellFit f;
  f.cell.guest_cell = g;
  f.cell.host_numa_node = hc.node;
  f.cell.vcpus = gc.vcpus;
  f.cell.memory_bytes = gc.memory_bytes;
  std::string lack;
  if (!fit_pages(hc, u, r, gc.memory_bytes, f.cell, lack)) {
    CellFit short_fit = lacking(hc, lack);
    short_fit.short_of_pages =
        r.page_size != PageSizeRequest::none && r.page_size != PageSizeRequest::small;
    return short_fit;
  }
  if (pins && want > hc.pcpus.count())
    return lacking(hc, "needs " + std::to_string(want) + " dedicated PUs, has " +
                           std::to_string(hc.pcpus.count()) + " in all");
  if (!shared.empty() && shared.size() > hc.shared_cpus.count())
    return lacking(hc, "needs " + std::to_string(shared.size()) + " shared PUs, has " +
                           std::to_string(hc.shared_cpus.count()) + " in all");
  const std::uint64_t memory_free =
      hc.memory_bytes > u.memory_used ? hc.memory_bytes - u.memory_used : 0;
  double cpu_left = 0, memory_left = 0;
  if (pins) {
    const unsigned free_pcpus = hc.pcpus.count_without(u.held);
    if (want > free_pcpus)
      return lacking(hc, "needs " + std::to_string(want) + " free dedicated PUs, has " +
                             std::to_string(free_pcpus));
    if (memory_free < gc.memory_bytes)
      return lacking(hc, "needs " + format_byte_size(gc.memory_bytes) + " of memory, has " +
                             format_byte_size(memory_free) + " free");
    auto chain = pack(hc, u.held, want, r, host.legacy, strategy, f.held, lack);
    if (!chain) return lacking(hc, lack);
    for (size_t i = 0; i < pinned.size(); ++i)
      f.cell.pinning.emplace_back(pinned[i], (*chain)[i]);
    if (reserve_emulator) f.emulator_pu = chain->back();
    cpu_left = static_cast<double>(free_pcpus - want) / hc.pcpus.count();
  } else {
    const double cpu_limit = hc.shared_cpus.count() * host.policy.cpu_allocation_ratio;
    if (u.cpu_usage + shared.size() > cpu_limit)
      return lacking(hc, "needs " + std::to_string(shared.size()) + " shared vCPUs, has " +
                             std::to_string(static_cast<long>(cpu_limit) - u.cpu_usage) +
                             " left under cpu_allocation_ratio");
    const double ram_limit =
        static_cast<double>(hc.memory_bytes) * host.policy.ram_allocation_ratio;
    if (static_cast<double>(u.memory_used + gc.memory_bytes) > ram_limit)
      return lacking(hc, "needs " + format_byte_size(gc.memory_bytes) + " of memory, has " +
                             format_byte_size(static_cast<std::uint64_t>(
                                 std::max(0.0, ram_limit - static_cast<double>(u.memory_used)))) +
                             " left under ram_allocation_ratio");
    cpu_left = (cpu_limit - u.cpu_usage - static_cast<double>(shared.size())) / cpu_limit;
  }
  f.cell.shared_vcpus = shared;
  if (!shared.empty()) f.cell.shared_pus = hc.shared_cpus;
  if (hc.memory_bytes)
    memory_left = static_cast<double>(memory_free - gc.memory_bytes) / hc.memory_bytes;
  f.set_left(cpu_left, memory_left);
  f.was_empty = u.held.empty() && u.cpu_usage == 0 && u.memory_used == 0;
  f.ok = true;
  return f;
}

std::string cell_text(const Request& r, unsigned g) {
  return "guest cell " + std::to_string(g) + " (" + std::to_string(r.cells[g].vcpus.size()) +
         " vCPUs, " + format_byte_size(r.cells[g].memory_bytes) + ")";
}

Placement assemble(const HostView& host, const Request& r, const std::vector<CellFit*>& cells,
                   const DeviceChoice& devices) {
  Placement p;
  p.vcpus = r.vcpus;
  p.memory_bytes = r.memory_bytes;
  p.cpu_policy = r.cpu_policy;
  CpuSet pinned_pus, shared_pus;
  for (const CellFit* f : cells) {
    p.cells.push_back(f->cell);
    p.held_pus |= f->held;
    for (const auto& [vcpu, pu] : f->cell.pinning)
      pinned_pus.set(pu);
    shared_pus |= f->cell.shared_pus;
    if (f->emulator_pu) p.emulator_pus.set(*f->emulator_pu);
  }
  // hw:emulator_threads_policy=share puts them on the host's cpu_shared_set, as Nova does;
  // without one (or without the policy) they share the guest's own PUs, unless one is isolated.
  const bool on_shared_set = r.emulator_threads == EmulatorThreadsPolicy::share &&
                             r.emulator_threads_given && host.policy.cpu_shared_set &&
                             !host.policy.cpu_shared_set->empty();
  if (p.emulator_pus.empty() && on_shared_set) p.emulator_pus = *host.policy.cpu_shared_set;
  if (p.emulator_pus.empty()) p.emulator_pus = pinned_pus | shared_pus;
  for (const auto& [index, alias] : devices.chosen) {
    const HostDevice& d = host.devices[index];
    DevicePlacement dp;
    dp.pci_bus_id = d.pci_bus_id;
    dp.numa_node = d.numa_node;
    dp.kind = d.accelerator ? "accelerator" : "nic";
    dp.id = d.id;
    dp.alias = alias;
    for (const auto& c : p.cells) {
      if (d.numa_node && c.host_numa_node == *d.numa_node) dp.guest_cell = c.guest_cell;
    }
    p.devices.push_back(std::move(dp));
  }
  // The rest of each device's IOMMU group, on the same guest cell as the device it comes with.
  for (const auto& c : devices.companions) {
    const HostDevice& with = host.devices[c.with];
    DevicePlacement dp;
    dp.pci_bus_id = c.pci_bus_id;
    dp.numa_node = c.device ? host.devices[*c.device].numa_node : with.numa_node;
    dp.kind = !c.device                             ? "iommu_group"
              : host.devices[*c.device].accelerator ? "accelerator"
                                                    : "nic";
    dp.id = c.device ? host.devices[*c.device].id : "";
    dp.alias = "iommu_group:" + std::to_string(c.group);
    for (const auto& existing : p.devices) {
      if (existing.pci_bus_id == with.pci_bus_id) dp.guest_cell = existing.guest_cell;
    }
    p.devices.push_back(std::move(dp));
  }
  return p;
}

// A guest without a NUMA topology: counted host-wide, as Nova's placement service does.
FitResult fit_floating(const HostView& host, const HostUsage& u, const Request& r,
                       Strategy strategy) {
  FitResult res;
  unsigned shared_total = 0, shared_used = u.floating_vcpus;
  std::uint64_t memory_total = 0, memory_used = u.floating_memory;
  for (size_t i = 0; i < host.cells.size(); ++i) {
    shared_total += host.cells[i].shared_cpus.count();
    shared_used += u.cells[i].cpu_usage;
    memory_total += host.cells[i].memory_bytes;
    memory_used += u.cells[i].memory_used;
  }
  const double cpu_limit = shared_total * host.policy.cpu_allocation_ratio;
  if (shared_used + r.vcpus > cpu_limit) {
    res.reason = "the host has " + std::to_string(static_cast<long>(cpu_limit) - shared_used) +
                 " shared vCPUs left under cpu_allocation_ratio, the request needs " +
                 std::to_string(r.vcpus);
    return res;
  }
  const double ram_limit = static_cast<double>(memory_total) * host.policy.ram_allocation_ratio;
  if (static_cast<double>(memory_used + r.memory_bytes) > ram_limit) {
    res.reason = "the host has " +
                 format_byte_size(static_cast<std::uint64_t>(
                     std::max(0.0, ram_limit - static_cast<double>(memory_used)))) +
                 " of memory left, the request needs " + format_byte_size(r.memory_bytes);
    return res;
  }
  DeviceChoice devices = choose_devices(host, u, r, {}, strategy);
  if (!devices.ok) {
    res.reason = devices.reason;
    return res;
  }
  res.fit = true;
  res.placement = assemble(host, r, {}, devices);
  return res;
}

bool wants_devices(const Request& r) {
  return !r.devices.empty() || r.rdma_nics > 0;
}

// Nova's host cell order for a guest with fewer cells than the host: three stable sorts, the
// last one dominant (PCI presence, then free pCPUs or CPU usage, then free memory).
std::vector<size_t> nova_cell_order(const HostView& host, const HostUsage& u, const Request& r) {
  std::vector<size_t> order(host.cells.size());
  std::iota(order.begin(), order.end(), 0);
  if (r.cells.size() >= host.cells.size()) return order;
  // The keys, computed once per cell rather than in every comparison.
  const bool pins = r.cpu_policy != CpuPolicy::shared;
  const size_t n = host.cells.size();
  std::vector<std::int64_t> free_memory(n);
  std::vector<unsigned> free_pcpus(n), free_devices(n, 0);
  for (size_t i = 0; i < n; ++i) {
    free_memory[i] = static_cast<std::int64_t>(host.cells[i].memory_bytes) -
                     static_cast<std::int64_t>(u.cells[i].memory_used);
    if (pins) free_pcpus[i] = host.cells[i].pcpus.count_without(u.cells[i].held);
  }
  const bool devices = wants_devices(r);
  if (devices) {
    for (const auto& d : host.devices) {
      if (u.devices.count(d.pci_bus_id)) continue;
      for (size_t i = 0; i < n; ++i)
        free_devices[i] += d.numa_node == host.cells[i].node ? 1 : 0;
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return free_memory[a] > free_memory[b]; });
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (pins) return free_pcpus[a] > free_pcpus[b];
    return u.cells[a].cpu_usage < u.cells[b].cpu_usage;
  });
  if (devices) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return free_devices[a] > free_devices[b]; });
  }
  return order;
}

// Lower is better: sockets the guest's cells span, the NUMA distances between its host nodes
// (sum over pairs), devices far from the guest, accelerators stranded, empty nodes broken into,
// resources stranded behind each other, room left (best fit). Spread and distance come first: a
// guest whose cells talk across the socket interconnect is slower than any packing gain.
using Score = std::tuple<unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, std::uint64_t>;

// Each guest cell's fit on each host cell. Identical guest cells (same vCPU count, pinned count
// and memory, no emulator PU reserved on cell 0) fit every host cell alike: then only guest cell
// 0's row is computed, and the chosen cells' own placements at the end.
struct CellTable {
  std::vector<std::vector<CellFit>> rows;
  bool identical = false;
  const CellFit& at(size_t g, size_t h) const { return rows[identical ? 0 : g][h]; }
};

// The host cells and device choice that hold the request, and what is kept while searching.
struct Choice {
  bool found = false;
  std::vector<size_t> cells;  // host cell per guest cell
  DeviceChoice devices;
  std::string device_reason;  // the first device refusal met, when nothing fits
};

// Device choices per set of host cells (the order of the guest cells does not change them).
struct DeviceMemo {
  const HostView& host;
  const HostUsage& usage;
  const Request& request;
  Strategy strategy;
  std::map<std::vector<size_t>, DeviceChoice> memo;
  DeviceChoice none;  // for a request without devices: nothing to choose per node set

  DeviceMemo(const HostView& h, const HostUsage& u, const Request& r, Strategy s)
      : host(h), usage(u), request(r), strategy(s) {
    none.ok = true;
  }

  const DeviceChoice& of(const std::vector<size_t>& cells) {
    if (!wants_devices(request)) return none;
    std::vector<size_t> key = cells;
    std::sort(key.begin(), key.end());
    auto it = memo.find(key);
    if (it == memo.end()) {
      std::vector<unsigned> nodes;
      for (size_t h : key)
        nodes.push_back(host.cells[h].node);
      it = memo.emplace(key, choose_devices(host, usage, request, nodes, strategy)).first;
    }
    return it->second;
  }
};

// Nova's own choice: depth first over its cell order, the first host cells (a permutation, one
// per guest cell) that hold every guest cell and the devices.
//
// Nova walks every permutation when the devices fit nowhere: for 8 guest cells on 24 nodes,
// hours. Here a set of host cells under which nothing fitted is not searched again in another
// order (what fits after it depends only on which cells are taken: the guest cells left are
// always the same, the devices are chosen per set), the search stops at its first refusal when
// the host lacks the devices whatever the nodes, and it gives up after kStepBudget steps. None
// of these changes which permutation is found first.
struct FirstFit {
  const CellTable& table;
  const std::vector<size_t>& order;
  DeviceMemo devices;
  std::vector<size_t> current;
  std::vector<bool> taken;
  std::unordered_set<std::vector<bool>> failed;  // sets of taken cells with nothing fitting after
  bool devices_fit_nowhere;
  bool stop = false;
  size_t steps = 0;
  Choice choice;

  // Far more than a search that succeeds needs (the fixtures' take a few hundred); about a second.
  static constexpr size_t kStepBudget = size_t{1} << 20;

  FirstFit(const HostView& h, const HostUsage& u, const Request& r, const CellTable& t,
           const std::vector<size_t>& o)
      : table(t),
        order(o),
        devices(h, u, r, Strategy::first_fit),
        taken(h.cells.size(), false),
        devices_fit_nowhere(too_few_free_devices(h, u, r)) {}

  bool gave_up() const { return steps > kStepBudget; }

  bool descend(size_t g) {
    if (++steps > kStepBudget) stop = true;
    if (stop) return false;
    if (g == devices.request.cells.size()) return leaf();
    if (g > 0 && failed.count(taken)) return false;
    for (size_t h : order) {
      if (taken[h] || !table.at(g, h).ok) continue;
      taken[h] = true;
      current.push_back(h);
      const bool done = descend(g + 1);
      current.pop_back();
      taken[h] = false;
      if (done) return true;
      if (stop) return false;
    }
    if (g > 0) failed.insert(taken);
    return false;
  }

  bool leaf() {
    const DeviceChoice& d = devices.of(current);
    if (!d.ok) {
      if (choice.device_reason.empty()) choice.device_reason = d.reason;
      stop = devices_fit_nowhere;
      return false;
    }
    choice.found = true;
    choice.cells = current;
    choice.devices = d;
    return true;
  }
};

// polyaccel's choice: the lowest score. Among equal scores it takes Nova's own first fit when
// that is one of them, else the first in the candidate lists' order (position by position, as a
// plain depth-first walk meets them), so the answer does not depend on the order the search
// takes. The search goes best-first (at each guest cell, the host cell that adds the fewest
// sockets and the least distance first) and drops every partial choice whose lower bound (SLIT
// distances to the cells chosen, the nearest free cells for the rest, the smallest packing terms
// left) already loses to the best found: on the 24-node SGI a four-cell guest visits a few
// hundred partial choices instead of tens of thousands.
class BranchAndBound {
 public:
  BranchAndBound(const HostView& host, const HostUsage& usage, const Request& request,
                 const CellTable& table, std::vector<std::vector<size_t>> order, size_t guest_cells)
      : host_(host),
        usage_(usage),
        table_(table),
        order_(std::move(order)),
        combinations_(table.identical),
        devices_(host, usage, request, Strategy::polyaccel),
        guest_cells_(guest_cells),
        cell_(host.cells.size()),
        devices_fit_nowhere_(too_few_free_devices(host, usage, request)),
        have_nearest_(host.cells_by_distance.size() == host.cells.size()) {
    // Every buffer sized once here: an allocation costs more than a level of the search.
    candidates_.reserve(host.cells.size() * guest_cells_);
    current_.reserve(guest_cells_);
    positions_.reserve(guest_cells_);
    added_.reserve(host.cells.size());
    std::vector<unsigned> sockets;
    sockets.reserve(host.cells.size());
    for (size_t x = 0; x < host_.cells.size(); ++x) {
      const auto& socket = host_.cells[x].socket;
      if (!socket) continue;
      auto it = std::find(sockets.begin(), sockets.end(), *socket);
      cell_[x].socket = static_cast<int>(it - sockets.begin());
      if (it == sockets.end()) sockets.push_back(*socket);
    }
    cells_on_socket_.assign(sockets.size(), 0);
    const size_t n = host_.cells.size();
    if (table_.identical) {
      // One row serves every guest cell: which host cells fit, and the packing terms' orders
      // (tail()); rest_ is not needed.
      usable_stride_ = 0;
      usable_from_.resize(n);
      for (size_t h = 0; h < n; ++h)
        usable_from_[h] = table_.at(0, h).ok;
      if (guest_cells_ > 1) sort_packing_terms();
    } else {
      // Per guest cell g: the smallest packing terms guest cells g.. can add, and which host
      // cells any of them fits.
      usable_stride_ = n;
      rest_.assign(guest_cells_ + 1, Tail{});
      usable_from_.assign((guest_cells_ + 1) * n, 0);
      for (size_t g = guest_cells_; g-- > 0;) {
        unsigned broken = ~0u, imbalance = ~0u;
        std::uint64_t left = ~std::uint64_t{0};
        for (size_t h = 0; h < n; ++h) {
          const CellFit& f = table_.at(g, h);
          usable_from_[g * n + h] = usable_from_[(g + 1) * n + h] || f.ok;
          if (!f.ok) continue;
          broken = std::min(broken, f.was_empty ? 1u : 0u);
          imbalance = std::min(imbalance, f.imbalance_pct);
          left = std::min(left, f.left_ppm);
        }
        rest_[g].broken = rest_[g + 1].broken + (broken == ~0u ? 0 : broken);
        rest_[g].imbalance = rest_[g + 1].imbalance + (imbalance == ~0u ? 0 : imbalance);
        rest_[g].left = rest_[g + 1].left + (left == ~std::uint64_t{0} ? 0 : left);
      }
    }
  }

  // Nova's own choice, met first: it wins every tie.
  void offer_first(const std::vector<size_t>& cells) {
    for (size_t g = 0; g < cells.size(); ++g)
      push(g, cells[g], 0);
    leaf(/*first=*/true);
    for (size_t g = cells.size(); g-- > 0;)
      pop(g, cells[g]);
  }

  Choice run() {
    descend(0, 0);
    return std::move(choice_);
  }

 private:
  // With identical guest cells, the host cells that fit, by each packing term, smallest first
  // (ties by index).
  void sort_packing_terms() {
    const size_t n = host_.cells.size();
    // Empty nodes broken is 0 or 1: the cells that were not empty, then those that were.
    by_broken_.reserve(n);
    for (int empty = 0; empty < 2; ++empty) {
      for (size_t h = 0; h < n; ++h) {
        const CellFit& f = table_.at(0, h);
        if (f.ok && f.was_empty == (empty == 1)) by_broken_.push_back(h);
      }
    }
    // Sorted as (term, cell) pairs: each term computed once per cell, not in every comparison.
    std::vector<std::pair<std::uint64_t, size_t>> terms;
    terms.reserve(n);
    auto sorted_cells = [&](auto term) {
      terms.clear();
      for (size_t h = 0; h < n; ++h) {
        const CellFit& f = table_.at(0, h);
        if (f.ok) terms.emplace_back(term(f), h);
      }
      std::sort(terms.begin(), terms.end());
      std::vector<size_t> cells;
      cells.reserve(terms.size());
      for (const auto& t : terms)
        cells.push_back(t.second);
      return cells;
    };
    by_imbalance_ = sorted_cells([](const CellFit& f) { return f.imbalance_pct; });
    by_left_ = sorted_cells([](const CellFit& f) { return f.left_ppm; });
  }

  // The sum of x's distances to its n nearest cells not taken (0, still a bound, for a view
  // built without cells_by_distance).
  unsigned nearest_free(size_t x, size_t n) const {
    unsigned sum = 0;
    if (!have_nearest_) return 0;
    for (const HostView::NearCell& y : host_.cells_by_distance[x]) {
      if (n == 0) break;
      if (cell_[y.cell].taken) continue;
      sum += y.distance;
      --n;
    }
    return sum;
  }

  // The free cells by socket, for the sockets bound: on the sockets in use, and the most on any
  // socket not in use (a cell without a socket counts as a socket of its own). Counted cell by
  // cell (count_room) into free_on_socket_.
  struct Room {
    size_t on_used = 0;
    size_t most_on_unused = 0;
  };
  void count_room(int socket, Room& r) {
    if (socket < 0) {
      r.most_on_unused = std::max<size_t>(r.most_on_unused, 1);
    } else if (cells_on_socket_[static_cast<size_t>(socket)] > 0) {
      ++r.on_used;
    } else {
      r.most_on_unused =
          std::max<size_t>(r.most_on_unused, ++free_on_socket_[static_cast<size_t>(socket)]);
    }
  }
  // At least this many sockets more for `rest` cells when `fit` of them can go on sockets in
  // use and at most `per_socket` on any other.
  static unsigned more_sockets(size_t rest, size_t fit, size_t per_socket) {
    if (rest <= fit || per_socket == 0) return 0;
    return static_cast<unsigned>((rest - fit + per_socket - 1) / per_socket);
  }

  // The packing terms (empty nodes broken, imbalance, room left) the `rest` guest cells after
  // guest cell g add at least: with identical guest cells the sums of the smallest over the free
  // host cells, else each guest cell's smallest over every host cell.
  struct Tail {
    unsigned broken = 0, imbalance = 0;
    std::uint64_t left = 0;
  };
  Tail tail(size_t g, size_t rest) const {
    Tail t;
    if (rest == 0) return t;
    if (!table_.identical) return rest_[g + 1];
    auto smallest = [&](const std::vector<size_t>& cells, auto term) {
      decltype(term(0)) sum = 0;
      size_t n = rest;
      for (size_t x : cells) {
        if (n == 0) break;
        if (cell_[x].taken) continue;
        sum += term(x);
        --n;
      }
      return sum;
    };
    t.broken = smallest(by_broken_, [&](size_t x) { return broken_of(x); });
    t.imbalance = smallest(by_imbalance_, [&](size_t x) { return table_.at(0, x).imbalance_pct; });
    t.left = smallest(by_left_, [&](size_t x) { return table_.at(0, x).left_ppm; });
    return t;
  }
  unsigned broken_of(size_t x) const { return table_.at(0, x).was_empty ? 1u : 0u; }

  struct Candidate {
    unsigned new_socket;      // sockets it and the cells after it add at least
    unsigned twice_distance;  // twice its distance to the cells chosen + its nearest to the rest
    size_t position;          // in the guest cell's list
    size_t cell;              // the host cell there
    Score bound;              // the least score a choice through it can have (see bound_of)
    bool operator<(const Candidate& o) const {
      return std::tie(new_socket, twice_distance, position) <
             std::tie(o.new_socket, o.twice_distance, o.position);
    }
  };

  // Deep enough for any real request on the biggest fixture; a pathological one (many cells on
  // a host of dozens of nodes) stops there with the best found so far.
  static constexpr size_t kVisitBudget = size_t{1} << 18;

  void push(size_t g, size_t h, size_t position) {
    cell_[h].taken = true;
    current_.push_back(h);
    positions_.push_back(position);
    distance_ += cell_[h].to_chosen;
    // The distances to the cells chosen serve the levels below; the last level has none.
    if (g + 1 < guest_cells_) {
      for (size_t x = 0; x < host_.cells.size(); ++x)
        cell_[x].to_chosen += host_.distance(x, h);
    }
    if (cell_[h].socket < 0)
      ++sockets_;
    else if (cells_on_socket_[static_cast<size_t>(cell_[h].socket)]++ == 0)
      ++sockets_;
    const CellFit& f = table_.at(g, h);
    broken_ += f.was_empty ? 1 : 0;
    imbalance_ += f.imbalance_pct;
    left_ += f.left_ppm;
  }

  void pop(size_t g, size_t h) {
    const CellFit& f = table_.at(g, h);
    broken_ -= f.was_empty ? 1 : 0;
    imbalance_ -= f.imbalance_pct;
    left_ -= f.left_ppm;
    if (cell_[h].socket < 0)
      --sockets_;
    else if (--cells_on_socket_[static_cast<size_t>(cell_[h].socket)] == 0)
      --sockets_;
    if (g + 1 < guest_cells_) {
      for (size_t x = 0; x < host_.cells.size(); ++x)
        cell_[x].to_chosen -= host_.distance(x, h);
    }
    distance_ -= cell_[h].to_chosen;
    positions_.pop_back();
    current_.pop_back();
    cell_[h].taken = false;
  }

  void descend(size_t g, size_t first_position) {
    if (g == guest_cells_) {
      leaf(/*first=*/false);
      return;
    }
    // What the cells after this one bring whichever candidate is taken: at least half of the
    // cheapest `rest` of (twice their distance to the cells chosen + their nearest `rest`
    // distances); taking one candidate away only raises that sum. At the last guest cell there
    // is no rest: a candidate's bound is its exact score but for the devices.
    const size_t rest = guest_cells_ - g - 1;
    unsigned rest_twice = 0;
    Room free_cells;
    Tail rest_terms;
    if (rest > 0) {
      // One pass over the free cells: each one's nearest `rest` distances (used by both
      // bounds), what it would bring the cells after this one, and the free cells by socket.
      const std::uint8_t* usable = &usable_from_[(g + 1) * usable_stride_];
      added_.clear();
      free_on_socket_.assign(cells_on_socket_.size(), 0);
      for (size_t x = 0; x < host_.cells.size(); ++x) {
        CellState& c = cell_[x];
        if (c.taken) continue;
        c.nearest = nearest_free(x, rest);
        if (usable[x]) added_.push_back(2 * c.to_chosen + c.nearest);
        count_room(c.socket, free_cells);
      }
      if (added_.size() < rest) return;
      std::partial_sort(added_.begin(), added_.begin() + static_cast<long>(rest), added_.end());
      for (size_t i = 0; i < rest; ++i)
        rest_twice += added_[i];
      rest_terms = tail(g, rest);
    }
    const size_t begin = candidates_.size();
    const std::vector<size_t>& order = order_of(g);
    for (size_t pos = combinations_ ? first_position : 0; pos < order.size(); ++pos) {
      const size_t h = order[pos];
      if (cell_[h].taken) continue;
      const CellFit& f = table_.at(g, h);
      if (!f.ok) continue;
      const int s = cell_[h].socket;
      const bool socket_in_use = s >= 0 && cells_on_socket_[static_cast<size_t>(s)] > 0;
      unsigned new_sockets = socket_in_use ? 0 : 1;
      unsigned twice_distance = 2 * cell_[h].to_chosen;
      if (rest > 0) {
        size_t fit = free_cells.on_used;
        if (socket_in_use) {
          --fit;  // h itself
        } else if (s >= 0) {
          fit += free_on_socket_[static_cast<size_t>(s)] - 1;
        }
        new_sockets += more_sockets(rest, fit, free_cells.most_on_unused);
        twice_distance += cell_[h].nearest;
      }
      Candidate c{new_sockets, twice_distance, pos, h, {}};
      c.bound = bound_of(f, c, rest_twice, rest_terms);
      candidates_.push_back(c);
    }
    if (devices_fit_nowhere_) {
      // Every leaf is refused, and the answer is the refusal ranked first: the first leaf a walk
      // in list order meets (the candidates are listed in that order).
      const size_t end = candidates_.size();
      for (size_t i = begin; i < end && !refused_; ++i) {
        const Candidate c = candidates_[i];
        push(g, c.cell, c.position);
        descend(g + 1, c.position + 1);
        pop(g, c.cell);
      }
      candidates_.resize(begin);
      return;
    }
    while (candidates_.size() > begin) {
      if (choice_.found && visits_ >= kVisitBudget) break;
      // A candidate that cannot win now never will: the best only gets better.
      constexpr size_t kNone = ~size_t{0};
      size_t best = kNone;
      for (size_t i = begin; i < candidates_.size();) {
        if (choice_.found && !may_win(g, candidates_[i])) {
          candidates_[i] = candidates_.back();
          candidates_.pop_back();
          continue;
        }
        if (best == kNone || candidates_[i] < candidates_[best]) best = i;
        ++i;
      }
      if (best == kNone) break;
      const Candidate c = candidates_[best];
      candidates_[best] = candidates_.back();
      candidates_.pop_back();
      ++visits_;
      const size_t h = c.cell;
      push(g, h, c.position);
      descend(g + 1, c.position + 1);
      pop(g, h);
    }
    candidates_.resize(begin);
  }

  // The least score of a choice that takes candidate c (its cell fit f) for this guest cell. It
  // depends only on the partial choice, which is the same whenever the search is at this level.
  Score bound_of(const CellFit& f, const Candidate& c, unsigned rest_twice,
                 const Tail& rest) const {
    return {sockets_ + c.new_socket,
            distance_ + (c.twice_distance + rest_twice + 1) / 2,
            0,
            0,
            broken_ + (f.was_empty ? 1 : 0) + rest.broken,
            imbalance_ + f.imbalance_pct + rest.imbalance,
            left_ + f.left_ppm + rest.left};
  }

  const std::vector<size_t>& order_of(size_t g) const { return order_[combinations_ ? 0 : g]; }

  // Whether taking candidate c for guest cell g may still beat the best.
  bool may_win(size_t g, const Candidate& c) const {
    const auto order = c.bound <=> best_score_;
    if (order < 0) return true;
    if (order > 0) return false;
    // A tie: only a choice ranked before the best can win it.
    if (best_rank_.empty()) return false;
    const auto prefix = std::mismatch(positions_.begin(), positions_.end(), best_rank_.begin());
    if (prefix.first != positions_.end()) return *prefix.first < *prefix.second;
    return c.position <= best_rank_[g];
  }

  void leaf(bool first) {
    const DeviceChoice& devices = devices_.of(current_);
    // Nova's choice ranks before every other (an empty position list sorts first).
    static const std::vector<size_t> kFirst;
    const std::vector<size_t>& rank = first ? kFirst : positions_;
    if (!devices.ok) {
      if (!refused_ || rank < refused_rank_) {
        refused_ = true;
        refused_rank_ = rank;
        choice_.device_reason = devices.reason;
      }
      return;
    }
    unsigned stranded = 0;
    for (size_t h : current_)
      stranded += devices.stranded_accelerators_on(host_, usage_, host_.cells[h].node);
    Score score{sockets_, distance_, devices.penalty, stranded, broken_, imbalance_, left_};
    if (!choice_.found || score < best_score_ || (score == best_score_ && rank < best_rank_)) {
      choice_.found = true;
      choice_.cells = current_;
      choice_.devices = devices;
      best_score_ = score;
      best_rank_ = rank;
    }
  }

  const HostView& host_;
  const HostUsage& usage_;
  const CellTable& table_;
  std::vector<std::vector<size_t>> order_;  // host cells to try, per guest cell (one if identical)
  bool combinations_;  // identical guest cells: one order of each set (positions ascending)
  DeviceMemo devices_;
  size_t guest_cells_;
  std::vector<Tail> rest_;  // [g]: the smallest packing terms guest cells g.. add (not identical)
  // [g * usable_stride_ + h]: a guest cell g.. fits host cell h (one row, stride 0, when the
  // guest cells are identical).
  std::vector<std::uint8_t> usable_from_;
  size_t usable_stride_ = 0;

  // The partial choice: host cells, their positions in the lists, and its score terms.
  std::vector<size_t> current_, positions_;
  // Per host cell, side by side: one buffer, read in every loop of the search.
  struct CellState {
    int socket = -1;         // dense socket index, -1 when unknown
    bool taken = false;      // by the partial choice
    unsigned to_chosen = 0;  // its distances to the cells chosen, summed
    unsigned nearest = 0;    // scratch: its nearest free distances (see descend)
  };
  std::vector<CellState> cell_;
  std::vector<unsigned> cells_on_socket_;
  std::vector<size_t> free_on_socket_;                      // scratch for count_room()
  std::vector<size_t> by_broken_, by_imbalance_, by_left_;  // for tail()
  unsigned sockets_ = 0, distance_ = 0, broken_ = 0, imbalance_ = 0;
  std::uint64_t left_ = 0;
  std::vector<unsigned> added_;        // scratch for the bounds
  std::vector<Candidate> candidates_;  // every level's, deepest last (see descend)
  bool devices_fit_nowhere_;  // too_few_free_devices: only the first leaf's refusal matters
  bool have_nearest_;         // the view has cells_by_distance

  Choice choice_;
  Score best_score_{};
  std::vector<size_t> best_rank_;
  bool refused_ = false;
  std::vector<size_t> refused_rank_;
  size_t visits_ = 0;
};

}  // namespace

FitResult fit(const HostView& host, const HostUsage& usage, const Request& request,
              Strategy strategy) {
  if (!request.numa_topology) return fit_floating(host, usage, request, strategy);
  FitResult res;
  const size_t guest_cells = request.cells.size();
  if (guest_cells > host.cells.size()) {
    res.reason = "the guest has " + std::to_string(guest_cells) +
                 " NUMA cells (hw:numa_nodes), the host only " + std::to_string(host.cells.size()) +
                 " NUMA nodes with CPUs";
    return res;
  }
  const bool isolate_emulator = request.emulator_threads == EmulatorThreadsPolicy::isolate;
  auto pinned_vcpus = [&](const GuestCell& c) {
    unsigned n = 0;
    for (unsigned v : c.vcpus)
      n += request.pinned_vcpus.test(v) ? 1 : 0;
    return n;
  };
  CellTable table;
  table.identical = !isolate_emulator;
  for (unsigned g = 1; g < guest_cells && table.identical; ++g) {
    const GuestCell& a = request.cells[0];
    const GuestCell& b = request.cells[g];
    table.identical = a.vcpus.size() == b.vcpus.size() && a.memory_bytes == b.memory_bytes &&
                      pinned_vcpus(a) == pinned_vcpus(b);
  }
  const size_t rows = table.identical ? 1 : guest_cells;
  table.rows.resize(rows);
  for (unsigned g = 0; g < rows; ++g) {
    std::string lacks;
    bool any = false, pages = false;
    table.rows[g].reserve(host.cells.size());
    for (size_t h = 0; h < host.cells.size(); ++h) {
      // Nova reserves the isolated emulator PU on the host cell of guest cell 0.
      table.rows[g].push_back(
          fit_cell(host, h, usage.cells[h], request, g, isolate_emulator && g == 0, strategy));
      const CellFit& f = table.rows[g].back();
      any = any || f.ok;
      if (!f.ok) lacks += (lacks.empty() ? "" : "; ") + f.lack;
      pages = pages || f.short_of_pages;
    }
    if (!any) {
      res.reason = cell_text(request, g) + " fits no host NUMA node: " + lacks;
      res.short_of_pages = pages;
      return res;
    }
  }
  const std::vector<size_t> nova_order = nova_cell_order(host, usage, request);
  Choice choice;
  if (strategy == Strategy::first_fit) {
    FirstFit nova(host, usage, request, table, nova_order);
    nova.descend(0);
    choice = std::move(nova.choice);
    if (!choice.found && nova.gave_up()) {
      res.reason =
          "gave up after " + std::to_string(FirstFit::kStepBudget) + " steps of the search for " +
          std::to_string(guest_cells) + " host NUMA nodes" +
          (choice.device_reason.empty() ? "" : "; the first refusal: " + choice.device_reason);
      return res;
    }
  } else {
    // Per guest cell (one list when they are identical), Nova's order sorted stably by the
    // packing terms: by (terms, place in Nova's order), which needs no buffer.
    using Key = std::tuple<bool, unsigned, std::uint64_t, size_t>;
    std::vector<Key> keys(host.cells.size());
    auto packing_order = [&](size_t g) {
      for (size_t i = 0; i < nova_order.size(); ++i) {
        const CellFit& f = table.at(g, nova_order[i]);
        keys[i] = {f.was_empty, f.imbalance_pct, f.left_ppm, i};
      }
      std::sort(keys.begin(), keys.end());
      std::vector<size_t> o;
      o.reserve(keys.size());
      for (const Key& k : keys)
        o.push_back(nova_order[std::get<3>(k)]);
      return o;
    };
    std::vector<std::vector<size_t>> order;
    order.reserve(table.identical ? 1 : guest_cells);
    for (unsigned g = 0; g < (table.identical ? 1u : guest_cells); ++g)
      order.push_back(packing_order(g));
    BranchAndBound search(host, usage, request, table, std::move(order), guest_cells);
    if (guest_cells > 1) {
      // Nova's own first fit is the first candidate, so the choice is never more spread out or
      // farther apart than Nova's.
      FirstFit nova(host, usage, request, table, nova_order);
      nova.descend(0);
      if (nova.choice.found) search.offer_first(nova.choice.cells);
    }
    choice = search.run();
  }
  if (!choice.found) {
    res.reason = !choice.device_reason.empty()
                     ? choice.device_reason
                     : "no set of " + std::to_string(guest_cells) +
                           " distinct host NUMA nodes holds every guest cell";
    return res;
  }
  // With identical guest cells only guest cell 0's row was computed: each chosen cell's own
  // placement (its vCPU numbers) now.
  std::vector<CellFit> chosen_fits;
  chosen_fits.reserve(guest_cells);
  for (unsigned g = 0; g < guest_cells; ++g) {
    const size_t h = choice.cells[g];
    chosen_fits.push_back(table.identical && g > 0
                              ? fit_cell(host, h, usage.cells[h], request, g, false, strategy)
                              : table.at(g, h));
  }
  std::vector<CellFit*> chosen;
  for (auto& f : chosen_fits)
    chosen.push_back(&f);
  res.fit = true;
  res.placement = assemble(host, request, chosen, choice.devices);
  return res;
}

Result<FitResult> fit(const HostView& host, const std::vector<Placement>& allocations,
                      const Request& request, Strategy strategy) {
  auto usage = usage_of(host, allocations);
  if (!usage) return usage.error();
  return fit(host, *usage, request, strategy);
}

}  // namespace polyaccel::place
