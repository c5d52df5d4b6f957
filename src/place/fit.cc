#include "place/fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

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
  CellPlacement cell;
  CpuSet held;
  std::optional<unsigned> emulator_pu;
  // What the cell has left afterwards, as shares of what it has: CPUs (dedicated or shared
  // capacity) and memory. Their sum measures fit (smaller: tighter); their difference measures
  // how much of one resource would be stranded behind the other.
  double cpu_left = 0;
  double memory_left = 0;
  bool was_empty = false;  // nothing of the cell was in use before
  unsigned imbalance_pct() const {
    return static_cast<unsigned>(std::abs(cpu_left - memory_left) * 100);
  }
  std::uint64_t left_ppm() const {
    return static_cast<std::uint64_t>((cpu_left + memory_left) * 1e6);
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
std::optional<std::vector<unsigned>> pack(const HostCell& hc, const CpuSet& held, unsigned want,
                                          const Request& r, bool legacy, Strategy strategy,
                                          CpuSet& holds, std::string& lack) {
  std::vector<std::vector<unsigned>> free_threads;
  for (const auto& core : hc.cores)
    free_threads.push_back((core - held).to_vector());
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
      if (free_threads[c].size() != hc.cores[c].count()) continue;
      chain.push_back(free_threads[c].front());
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
    for (size_t c = 0; c < free_threads.size(); ++c) {
      if (free_threads[c].size() >= k) candidates.push_back(c);
    }
    if (candidates.size() * k < want) continue;
    if (strategy == Strategy::polyaccel) {
      std::stable_sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
        return free_threads[a].size() < free_threads[b].size();
      });
    }
    std::vector<unsigned> chain;
    for (size_t c : candidates) {
      for (unsigned t = 0; t < k && chain.size() < want; ++t)
        chain.push_back(free_threads[c][t]);
      if (chain.size() == want) break;
    }
    for (unsigned pu : chain)
      holds.set(pu);
    return chain;
  }
  if (r.thread_policy == ThreadPolicy::require) {
    size_t pairs = 0;
    for (const auto& f : free_threads)
      pairs += f.size() >= 2 ? 1 : 0;
    lack = "hw:cpu_thread_policy=require needs " + std::to_string((want + 1) / 2) +
           " cores with at least 2 free siblings, has " + std::to_string(pairs);
    return std::nullopt;
  }
  std::vector<unsigned> chain;  // last resort: every free thread as its own core
  for (const auto& f : free_threads) {
    for (unsigned pu : f) {
      if (chain.size() < want) chain.push_back(pu);
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
  if (!fit_pages(hc, u, r, gc.memory_bytes, f.cell, lack)) return lacking(hc, lack);
  if (pins && want > hc.pcpus.count())
    return lacking(hc, "needs " + std::to_string(want) + " dedicated PUs, has " +
                           std::to_string(hc.pcpus.count()) + " in all");
  if (!shared.empty() && shared.size() > hc.shared_cpus.count())
    return lacking(hc, "needs " + std::to_string(shared.size()) + " shared PUs, has " +
                           std::to_string(hc.shared_cpus.count()) + " in all");
  const std::uint64_t memory_free =
      hc.memory_bytes > u.memory_used ? hc.memory_bytes - u.memory_used : 0;
  if (pins) {
    const unsigned free_pcpus = (hc.pcpus - u.held).count();
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
    f.cpu_left = static_cast<double>(free_pcpus - want) / hc.pcpus.count();
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
    f.cpu_left = (cpu_limit - u.cpu_usage - static_cast<double>(shared.size())) / cpu_limit;
  }
  f.cell.shared_vcpus = shared;
  if (!shared.empty()) f.cell.shared_pus = hc.shared_cpus;
  if (hc.memory_bytes)
    f.memory_left = static_cast<double>(memory_free - gc.memory_bytes) / hc.memory_bytes;
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

// Nova's host cell order for a guest with fewer cells than the host: three stable sorts, the
// last one dominant (PCI presence, then free pCPUs or CPU usage, then free memory).
std::vector<size_t> nova_cell_order(const HostView& host, const HostUsage& u, const Request& r) {
  std::vector<size_t> order(host.cells.size());
  std::iota(order.begin(), order.end(), 0);
  if (r.cells.size() >= host.cells.size()) return order;
  auto free_memory = [&](size_t i) {
    return static_cast<std::int64_t>(host.cells[i].memory_bytes) -
           static_cast<std::int64_t>(u.cells[i].memory_used);
  };
  auto free_devices = [&](size_t i) {
    int n = 0;
    for (const auto& d : host.devices)
      n += d.numa_node == host.cells[i].node && !u.devices.count(d.pci_bus_id) ? 1 : 0;
    return n;
  };
  const bool pins = r.cpu_policy != CpuPolicy::shared;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return free_memory(a) > free_memory(b); });
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (pins)
      return (host.cells[a].pcpus - u.cells[a].held).count() >
             (host.cells[b].pcpus - u.cells[b].held).count();
    return u.cells[a].cpu_usage < u.cells[b].cpu_usage;
  });
  if (!r.devices.empty() || r.rdma_nics > 0) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return free_devices(a) > free_devices(b); });
  }
  return order;
}

// Lower is better: sockets the guest's cells span, the NUMA distances between its host nodes
// (sum over pairs), devices far from the guest, accelerators stranded, empty nodes broken into,
// resources stranded behind each other, room left (best fit). Spread and distance come first: a
// guest whose cells talk across the socket interconnect is slower than any packing gain.
using Score = std::tuple<unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, std::uint64_t>;

// The part of the score that only grows as cells are added: a lower bound for a partial choice.
std::pair<unsigned, unsigned> spread_of(const HostView& host, const std::vector<size_t>& cells) {
  std::set<unsigned> sockets;
  unsigned unknown = 0, distance = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto& socket = host.cells[cells[i]].socket;
    if (socket)
      sockets.insert(*socket);
    else
      ++unknown;
    for (size_t j = 0; j < i; ++j)
      distance += host.distance(cells[i], cells[j]);
  }
  return {static_cast<unsigned>(sockets.size()) + unknown, distance};
}

struct Search {
  Search(const HostView& h, const HostUsage& u, const Request& r, Strategy st)
      : host(h), usage(u), request(r), strategy(st) {
    no_devices.ok = true;
  }

  const HostView& host;
  const HostUsage& usage;
  const Request& request;
  Strategy strategy;
  std::vector<std::vector<CellFit>> table;  // [guest cell][host cell]
  std::vector<std::vector<size_t>> order;   // host cells to try, per guest cell
  std::vector<size_t> current;
  std::vector<bool> taken;
  std::map<std::vector<size_t>, DeviceChoice> device_memo;
  bool found = false;
  Score best_score{};
  std::vector<size_t> best;
  DeviceChoice best_devices;
  std::string device_reason;
  size_t leaves_after_found = 0;
  static constexpr size_t kLeafBudget = 1024;
  DeviceChoice no_devices;  // for a request without devices: nothing to choose per node set

  bool done() const {
    return found && (strategy == Strategy::first_fit || leaves_after_found >= kLeafBudget);
  }

  const DeviceChoice& devices_for_current() {
    if (request.devices.empty() && request.rdma_nics == 0) return no_devices;
    std::vector<size_t> key = current;
    std::sort(key.begin(), key.end());
    auto it = device_memo.find(key);
    if (it == device_memo.end()) {
      std::vector<unsigned> nodes;
      for (size_t h : key)
        nodes.push_back(host.cells[h].node);
      it = device_memo.emplace(key, choose_devices(host, usage, request, nodes, strategy)).first;
    }
    return it->second;
  }

  void leaf() {
    const DeviceChoice& devices = devices_for_current();
    if (found) ++leaves_after_found;
    if (!devices.ok) {
      if (device_reason.empty()) device_reason = devices.reason;
      return;
    }
    const auto [sockets, distance] = spread_of(host, current);
    unsigned stranded = 0, broken = 0, imbalance = 0;
    std::uint64_t left = 0;
    for (size_t g = 0; g < current.size(); ++g) {
      const CellFit& f = table[g][current[g]];
      stranded += devices.stranded_accelerators_on(host, usage, host.cells[current[g]].node);
      broken += f.was_empty ? 1 : 0;
      imbalance += f.imbalance_pct();
      left += f.left_ppm();
    }
    Score score{sockets, distance, devices.penalty, stranded, broken, imbalance, left};
    if (!found || score < best_score) {
      found = true;
      best_score = score;
      best = current;
      best_devices = devices;
    }
  }

  // Identical guest cells make every permutation of one set of host nodes score the same: then
  // only one order of each set is tried (positions ascending), and the budget covers more sets.
  bool symmetric = false;

  void descend(size_t g, size_t first_position = 0) {
    if (done()) return;
    if (g == table.size()) {
      leaf();
      return;
    }
    for (size_t pos = symmetric ? first_position : 0; pos < order[g].size(); ++pos) {
      const size_t h = order[g][pos];
      if (taken[h] || !table[g][h].ok) continue;
      taken[h] = true;
      current.push_back(h);
      // Spread and distance only grow with more cells: a partial choice already worse than the
      // best leaf cannot win.
      if (found && strategy == Strategy::polyaccel &&
          spread_of(host, current) >
              std::make_pair(std::get<0>(best_score), std::get<1>(best_score))) {
        current.pop_back();
        taken[h] = false;
        continue;
      }
      descend(g + 1, pos + 1);
      current.pop_back();
      taken[h] = false;
      if (done()) return;
    }
  }
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
  Search s(host, usage, request, strategy);
  s.table.resize(guest_cells);
  const bool isolate_emulator = request.emulator_threads == EmulatorThreadsPolicy::isolate;
  for (unsigned g = 0; g < guest_cells; ++g) {
    std::string lacks;
    bool any = false;
    for (size_t h = 0; h < host.cells.size(); ++h) {
      // Nova reserves the isolated emulator PU on the host cell of guest cell 0.
      s.table[g].push_back(
          fit_cell(host, h, usage.cells[h], request, g, isolate_emulator && g == 0, strategy));
      const CellFit& f = s.table[g].back();
      any = any || f.ok;
      if (!f.ok) lacks += (lacks.empty() ? "" : "; ") + f.lack;
    }
    if (!any) {
      res.reason = cell_text(request, g) + " fits no host NUMA node: " + lacks;
      return res;
    }
  }
  std::vector<size_t> nova_order = nova_cell_order(host, usage, request);
  for (unsigned g = 0; g < guest_cells; ++g) {
    std::vector<size_t> o = nova_order;
    if (strategy == Strategy::polyaccel) {
      std::stable_sort(o.begin(), o.end(), [&](size_t a, size_t b) {
        const CellFit& fa = s.table[g][a];
        const CellFit& fb = s.table[g][b];
        return std::make_tuple(fa.was_empty, fa.imbalance_pct(), fa.left_ppm()) <
               std::make_tuple(fb.was_empty, fb.imbalance_pct(), fb.left_ppm());
      });
    }
    s.order.push_back(std::move(o));
  }
  s.taken.assign(host.cells.size(), false);
  s.symmetric = strategy == Strategy::polyaccel && !isolate_emulator;
  for (unsigned g = 1; g < guest_cells && s.symmetric; ++g) {
    const GuestCell& a = request.cells[0];
    const GuestCell& b = request.cells[g];
    auto pinned = [&](const GuestCell& c) {
      unsigned n = 0;
      for (unsigned v : c.vcpus)
        n += request.pinned_vcpus.test(v) ? 1 : 0;
      return n;
    };
    s.symmetric = a.vcpus.size() == b.vcpus.size() && a.memory_bytes == b.memory_bytes &&
                  pinned(a) == pinned(b);
  }
  if (strategy == Strategy::polyaccel && guest_cells > 1) {
    // Nova's own first fit is the first candidate, so the choice is never more spread out or
    // farther apart than Nova's, whatever the leaf budget leaves unexplored on a big host.
    Search nova(host, usage, request, Strategy::first_fit);
    nova.table = s.table;
    nova.order.assign(guest_cells, nova_order);
    nova.taken.assign(host.cells.size(), false);
    nova.descend(0);
    if (nova.found) {
      s.current = nova.best;
      s.leaf();
      s.current.clear();
    }
  }
  s.descend(0);
  if (!s.found) {
    res.reason = !s.device_reason.empty() ? s.device_reason
                                          : "no set of " + std::to_string(guest_cells) +
                                                " distinct host NUMA nodes holds every guest cell";
    return res;
  }
  std::vector<CellFit*> chosen;
  for (size_t g = 0; g < guest_cells; ++g)
    chosen.push_back(&s.table[g][s.best[g]]);
  res.fit = true;
  res.placement = assemble(host, request, chosen, s.best_devices);
  return res;
}

Result<FitResult> fit(const HostView& host, const std::vector<Placement>& allocations,
                      const Request& request, Strategy strategy) {
  auto usage = usage_of(host, allocations);
  if (!usage) return usage.error();
  return fit(host, *usage, request, strategy);
}

}  // namespace polyaccel::place
