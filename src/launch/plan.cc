#include "launch/plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/byte_size.h"
#include "core/strings.h"
#include "discover/links.h"

namespace polyaccel {

namespace {

// The order GPUs are listed in: PCI address, as nvidia-smi and the drivers enumerate them.
bool by_pci_address(const Accelerator* a, const Accelerator* b) {
  return a->pci.address < b->pci.address;
}

// The CPUs a device is local to, within what the caller may use.
CpuSet local_cpus_of(const PciDevice& d, const CpuSet& allowed) {
  return d.local_cpus & allowed;
}

// Whole cores (their allowed PUs) inside `cpus`, in PU order: the unit of a fair share, so that
// SMT siblings stay with one rank.
std::vector<CpuSet> core_units(const HostModel& m, const CpuSet& cpus) {
  std::vector<CpuSet> units;
  CpuSet covered;
  for (const auto& c : m.cores) {
    CpuSet part = c.pus & cpus;
    if (part.empty()) continue;
    units.push_back(part);
    covered |= part;
  }
  for (unsigned pu : (cpus - covered).to_vector())
    units.push_back(CpuSet{pu});
  std::sort(units.begin(), units.end(),
            [](const CpuSet& a, const CpuSet& b) { return *a.first() < *b.first(); });
  return units;
}

// Share `k` of `m` of the cores in `cpus`, by whole cores when there are enough, else by PUs.
CpuSet fair_share(const HostModel& model, const CpuSet& cpus, size_t k, size_t m,
                  std::vector<std::string>& warnings, unsigned& threads) {
  std::vector<CpuSet> units = core_units(model, cpus);
  if (units.size() < m) {
    units.clear();
    for (unsigned pu : cpus.to_vector())
      units.push_back(CpuSet{pu});
  }
  CpuSet share;
  if (units.size() >= m) {
    for (size_t i = k * units.size() / m; i < (k + 1) * units.size() / m; ++i)
      share |= units[i];
    threads = static_cast<unsigned>((k + 1) * units.size() / m - k * units.size() / m);
  } else if (!units.empty()) {
    share = units[k % units.size()];
    threads = 1;
    warnings.push_back(std::to_string(m) + " ranks share " + std::to_string(units.size()) +
                       " CPUs: ranks overlap");
  }
  return share;
}

unsigned count_cores(const HostModel& model, const CpuSet& cpus) {
  return static_cast<unsigned>(core_units(model, cpus).size());
}

std::vector<unsigned> memory_nodes(const HostModel& model,
                                   const std::vector<const Accelerator*>& gpus,
                                   const CpuSet& cpus) {
  std::set<unsigned> nodes;
  for (const Accelerator* a : gpus)
    nodes.insert(a->pci.numa_nodes.begin(), a->pci.numa_nodes.end());
  if (nodes.empty()) {
    for (unsigned n : model.numa_nodes_of(cpus))
      nodes.insert(n);
  }
  return {nodes.begin(), nodes.end()};
}

LinkLevel link_between(const HostModel& m, const std::string& a, const std::string& b) {
  auto i = m.links.index_of(a), j = m.links.index_of(b);
  if (!i || !j) return LinkLevel::sys;
  return m.links.at(*i, *j).level;
}

void add_env(LaunchPlan& plan, const std::string& key, const std::string& value) {
  plan.env.emplace_back(key, value);
}

// CUDA_VISIBLE_DEVICES and its AMD and Gaudi counterparts. UUIDs when a vendor library gave
// them (immune to enumeration order), else PCI-order indexes with CUDA told to use that order.
// A local rank's variable lists every GPU of `visible` of its vendor, its own moved to the index
// of its rank (see LaunchPlan::device_index); otherwise only the chosen GPUs.
// A GPU the process was narrowed to by MIG devices (inherited_gpus' `migs`) is named by them, not
// by its whole-GPU UUID: the process never gets wider than it was given.
void visibility_env(const HostModel& model, const std::vector<const Accelerator*>& gpus,
                    const std::vector<const Accelerator*>& visible,
                    const std::map<const Accelerator*, std::vector<std::string>>& migs,
                    std::optional<unsigned> order_rank, LaunchPlan& plan) {
  struct Vendorvar {
    Vendor vendor;
    const char* variable;
  };
  for (Vendorvar v : {Vendorvar{Vendor::nvidia, "CUDA_VISIBLE_DEVICES"},
                      Vendorvar{Vendor::amd, "ROCR_VISIBLE_DEVICES"},
                      Vendorvar{Vendor::intel_gaudi, "HABANA_VISIBLE_MODULES"}}) {
    const auto all = model.accelerators_of(v.vendor);
    if (all.empty()) continue;
    std::vector<const Accelerator*> listed;
    if (order_rank && gpus.size() == 1 && gpus[0]->vendor == v.vendor) {
      for (const Accelerator* a : visible) {
        if (a->vendor == v.vendor && a != gpus[0]) listed.push_back(a);
      }
      const size_t at = std::min<size_t>(*order_rank, listed.size());
      listed.insert(listed.begin() + static_cast<std::ptrdiff_t>(at), gpus[0]);
      plan.device_index = static_cast<unsigned>(at);
    } else {
      for (const Accelerator* a : gpus) {
        if (a->vendor == v.vendor) listed.push_back(a);
      }
    }
    std::vector<std::string> values;
    bool by_index = false;
    for (const Accelerator* a : listed) {
      if (auto m = migs.find(a); v.vendor == Vendor::nvidia && m != migs.end()) {
        values.insert(values.end(), m->second.begin(), m->second.end());
      } else if (v.vendor != Vendor::intel_gaudi && a->inventory && !a->inventory->uuid.empty()) {
        values.push_back(a->inventory->uuid);
      } else if (v.vendor == Vendor::intel_gaudi && a->inventory) {
        values.push_back(std::to_string(a->inventory->index));  // HLML's module id order
      } else {
        auto pos = std::find(all.begin(), all.end(), a) - all.begin();
        values.push_back(std::to_string(pos));
        by_index = true;
      }
    }
    add_env(plan, v.variable, join(values, ","));
    if (v.vendor == Vendor::nvidia && by_index) add_env(plan, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  }
}

// The vendor a visibility variable speaks for.
std::optional<Vendor> vendor_of_variable(const std::string& variable) {
  if (variable == "NVIDIA_VISIBLE_DEVICES" || variable == "CUDA_VISIBLE_DEVICES")
    return Vendor::nvidia;
  if (variable == "ROCR_VISIBLE_DEVICES" || variable == "HIP_VISIBLE_DEVICES") return Vendor::amd;
  if (variable == "HABANA_VISIBLE_MODULES") return Vendor::intel_gaudi;
  return std::nullopt;
}

// The GPUs this process was given (LaunchRequest::inherited_visibility), in PCI order. Each
// variable narrows its vendor's list further, as the runtimes compound them (an index of
// CUDA_VISIBLE_DEVICES counts within what NVIDIA_VISIBLE_DEVICES left, HIP's within ROCr's); a
// UUID names one GPU wherever it stands; a MIG device's UUID names its GPU, and `migs` keeps the
// MIG UUIDs each such GPU was given by. "all" leaves the list; "", "void" and "none" empty it.
Result<std::vector<const Accelerator*>> inherited_gpus(
    const HostModel& model, const LaunchRequest& request,
    std::map<const Accelerator*, std::vector<std::string>>& migs) {
  std::vector<const Accelerator*> visible;
  for (const auto& a : model.accelerators)
    visible.push_back(&a);
  for (const auto& [variable, value] : request.inherited_visibility) {
    auto vendor = vendor_of_variable(variable);
    if (!vendor || model.accelerators_of(*vendor).empty()) continue;
    if (value == "all") continue;
    std::vector<const Accelerator*> mine, others;
    for (const Accelerator* a : visible)
      (a->vendor == *vendor ? mine : others).push_back(a);
    std::vector<const Accelerator*> kept;
    if (value != "" && value != "void" && value != "none" && value != "NoDevFiles") {
      for (const auto& token : split(value, ',')) {
        const Accelerator* found = nullptr;
        if (token.starts_with("MIG-")) {
          for (const Accelerator* a : mine) {
            if (!a->inventory) continue;
            for (const auto& m : a->inventory->mig_instances)
              if (m.uuid == token) found = a;
          }
          if (!found) {
            return bad_input(variable + "=" + value,
                             "names MIG device " + token +
                                 ", which is no MIG instance of the GPUs visible to this process",
                             "run it where that instance exists (polyaccel topo lists them)");
          }
          auto& given = migs[found];
          if (std::find(given.begin(), given.end(), token) == given.end()) given.push_back(token);
        } else if (auto index = parse_count(token)) {
          if (*vendor == Vendor::intel_gaudi) {
            for (const Accelerator* a : mine) {
              if (a->inventory && a->inventory->index == *index) found = a;
            }
          } else if (*index < mine.size()) {
            found = mine[*index];
          }
        } else {
          for (const Accelerator* a : mine) {
            if (a->inventory && a->inventory->uuid == token) found = a;
          }
        }
        if (!found) {
          return bad_input(variable + "=" + value, "names " + token + ", which is not one of the " +
                                                       std::to_string(mine.size()) +
                                                       " GPUs visible to this process");
        }
        if (std::find(kept.begin(), kept.end(), found) == kept.end()) kept.push_back(found);
      }
    }
    std::sort(kept.begin(), kept.end(), by_pci_address);
    visible = others;
    visible.insert(visible.end(), kept.begin(), kept.end());
  }
  std::sort(visible.begin(), visible.end(), by_pci_address);
  return visible;
}

// The network variables from the NICs NCCL should use for the GPUs (discover/links: the same
// rule as topo, Allocate and the audit); a GPU without one leaves the choice to NCCL.
void network_env(const HostModel& model, const std::vector<const Accelerator*>& gpus,
                 const LaunchRequest& request, LaunchPlan& plan) {
  std::vector<const Nic*> nics;
  for (const Accelerator* a : gpus) {
    auto near = nccl_nics(model, *a);
    if (near.empty() && !model.nics.empty())
      plan.warnings.push_back(a->id +
                              " has no NIC on its NUMA node or socket: NIC choice left to NCCL");
    for (const Nic* n : near) {
      if (std::find(nics.begin(), nics.end(), n) == nics.end()) nics.push_back(n);
    }
  }
  auto usable = [&](const std::string& netdev) {
    return request.usable_netdevs &&
           std::find(request.usable_netdevs->begin(), request.usable_netdevs->end(), netdev) !=
               request.usable_netdevs->end();
  };
  for (const auto& [k, v] : nccl_network_env(nics, usable))
    add_env(plan, k, v);
}

Status hugepage_env(const HostModel& model, const LaunchRequest& request, LaunchPlan& plan) {
  std::string value;
  if (request.transparent_hugepages) {
    value = "1";
  } else if (request.hugepage_bytes) {
    const std::uint64_t size = *request.hugepage_bytes;
    std::uint64_t available = 0;
    bool known_size = false;
    for (unsigned n : plan.mems) {
      const NumaNode* node = model.numa_node(n);
      if (!node) continue;
      for (const auto& h : node->hugepages) {
        if (h.size_bytes != size) continue;
        known_size = true;
        available += h.free ? *h.free : h.total;
      }
    }
    std::string nodes;
    for (unsigned n : plan.mems)
      nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
    if (!known_size) {
      return bad_input("--hugepages " + format_byte_size(size),
                       "this host has no hugepages of that size on NUMA node " + nodes);
    }
    if (available == 0) {
      return bad_input("--hugepages " + format_byte_size(size),
                       "no free hugepages of that size on NUMA node " + nodes,
                       "reserve some: echo N > /sys/devices/system/node/nodeX/hugepages/"
                       "hugepages-" +
                           std::to_string(size / 1024) + "kB/nr_hugepages");
    }
    // glibc >= 2.35: a value above 2 is the hugepage size to mmap with MAP_HUGETLB.
    value = std::to_string(size);
  } else {
    return Ok{};
  }
  std::string tunables = request.existing_glibc_tunables;
  if (!tunables.empty()) tunables += ":";
  add_env(plan, "GLIBC_TUNABLES", tunables + "glibc.malloc.hugetlb=" + value);
  return Ok{};
}

Result<std::vector<const Accelerator*>> resolve_ids(const HostModel& model,
                                                    const std::vector<std::string>& ids) {
  std::vector<const Accelerator*> out;
  for (const auto& id : ids) {
    const Accelerator* a = model.accelerator(id);
    if (!a)
      return bad_input("--gpu " + id, "no such accelerator", "list them with `polyaccel topo`");
    if (std::find(out.begin(), out.end(), a) != out.end()) {
      return bad_input("--gpu " + id, "given twice");
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace

std::vector<const Accelerator*> choose_gpus(const HostModel& model,
                                            const std::vector<const Accelerator*>& available,
                                            unsigned count) {
  if (count == 0 || available.size() < count) return {};
  // Greedy from every start: add the GPU whose worst link to the set is best. The candidate sets
  // are then ranked; n starts × n² steps is nothing for the 8 or 16 GPUs of a host.
  using Score = std::tuple<size_t, int, int, std::vector<size_t>>;
  std::optional<Score> best;
  std::vector<const Accelerator*> best_set;
  for (size_t start = 0; start < available.size(); ++start) {
    std::vector<const Accelerator*> set{available[start]};
    std::vector<bool> used(available.size(), false);
    used[start] = true;
    while (set.size() < count) {
      size_t pick = available.size();
      std::pair<int, bool> pick_key{0, false};
      for (size_t i = 0; i < available.size(); ++i) {
        if (used[i]) continue;
        int worst = 0;
        for (const Accelerator* s : set)
          worst = std::max(worst, static_cast<int>(link_between(model, s->id, available[i]->id)));
        bool same_numa = available[i]->pci.numa_nodes == set.front()->pci.numa_nodes;
        std::pair<int, bool> key{worst, !same_numa};
        if (pick == available.size() || key < pick_key) {
          pick = i;
          pick_key = key;
        }
      }
      used[pick] = true;
      set.push_back(available[pick]);
    }
    std::set<unsigned> nodes;
    int worst_link = 0, nic_score = 0;
    std::vector<size_t> order;
    for (const Accelerator* a : set) {
      nodes.insert(a->pci.numa_nodes.begin(), a->pci.numa_nodes.end());
      for (const Accelerator* b : set) {
        if (a != b)
          worst_link = std::max(worst_link, static_cast<int>(link_between(model, a->id, b->id)));
      }
      int nic = static_cast<int>(LinkLevel::sys) + 1;
      for (const auto& n : a->closest_nics)
        nic = std::min(nic, static_cast<int>(link_between(model, a->id, n)));
      nic_score += nic;
      order.push_back(static_cast<size_t>(a - model.accelerators.data()));
    }
    std::sort(order.begin(), order.end());
    Score score{nodes.size(), worst_link, nic_score, order};
    if (!best || score < *best) {
      best = score;
      best_set = set;
    }
  }
  std::sort(best_set.begin(), best_set.end(), by_pci_address);
  return best_set;
}

Result<LaunchPlan> plan_launch(const HostModel& model, const LaunchRequest& request) {
  LaunchPlan plan;
  plan.argv = request.argv;
  if (request.argv.empty())
    return bad_input("CMD", "nothing to run", "polyaccel run [options] -- CMD ARGS...");
  if (request.gpu_count && !request.gpu_ids.empty())
    return bad_input("--gpus/--gpu", "give one, not both");
  if (request.fixed_cpus && request.local_rank) {
    return bad_input("--local-rank", "the CPUs are already decided");
  }
  if (request.gpu_count && request.local_rank) {
    return bad_input("--gpus/--local-rank", "a local rank gets one GPU: give one, not both");
  }
  if (request.gpu_count && *request.gpu_count == 0)
    return bad_input("--gpus 0", "ask for at least one GPU");
  const CpuSet allowed =
      request.allowed_cpus.empty() ? model.pus : request.allowed_cpus & model.pus;
  if (allowed.empty())
    return bad_input("CPU affinity", "none of this process's CPUs is in the host model");

  auto is_unavailable = [&](const Accelerator* a) {
    return std::find(request.unavailable_gpus.begin(), request.unavailable_gpus.end(),
                     a->pci.address) != request.unavailable_gpus.end();
  };

  std::map<const Accelerator*, std::vector<std::string>> migs;
  auto visible = inherited_gpus(model, request, migs);
  if (!visible) return visible.error();
  auto is_visible = [&](const Accelerator* a) {
    return std::find(visible->begin(), visible->end(), a) != visible->end();
  };

  std::vector<const Accelerator*> pool;
  if (!request.gpu_ids.empty()) {
    auto resolved = resolve_ids(model, request.gpu_ids);
    if (!resolved) return resolved.error();
    pool = *resolved;
    for (const Accelerator* a : pool) {
      if (is_unavailable(a)) return bad_input("--gpu " + a->id, "reserved by another run");
      if (!is_visible(a)) {
        return bad_input("--gpu " + a->id, "not among the GPUs this process was given (" +
                                               request.inherited_visibility.back().first + ")");
      }
    }
  } else {
    for (const Accelerator* a : *visible) {
      if (!is_unavailable(a)) pool.push_back(a);
    }
  }

  std::vector<const Accelerator*> gpus;
  unsigned threads = 0;
  if (request.local_rank) {
    const unsigned rank = *request.local_rank;
    // Without accelerators, ranks spread over the NUMA nodes that have CPUs.
    std::vector<CpuSet> domains;
    if (!pool.empty()) {
      // A GPU of unknown locality takes the CPUs no GPU is local to (all of them when none is
      // known): ranks then never overlap, whatever mix of GPUs the host has.
      CpuSet known;
      for (const Accelerator* a : pool)
        known |= local_cpus_of(a->pci, allowed);
      CpuSet rest = allowed - known;
      for (const Accelerator* a : pool) {
        CpuSet local = local_cpus_of(a->pci, allowed);
        domains.push_back(!local.empty() ? local : !rest.empty() ? rest : allowed);
      }
    } else if (!request.gpu_count && request.gpu_ids.empty() && model.accelerators.empty()) {
      for (const auto& n : model.numa_nodes) {
        CpuSet local = n.cpus & allowed;
        if (!local.empty()) domains.push_back(local);
      }
    }
    const std::string source =
        request.local_rank_source.empty() ? "--local-rank" : request.local_rank_source;
    if (domains.empty()) {
      return bad_input(source + "=" + std::to_string(rank), "no free accelerator for this rank");
    }
    const unsigned world = request.local_world_size.value_or(static_cast<unsigned>(domains.size()));
    if (rank >= world) {
      return bad_input(source + "=" + std::to_string(rank),
                       "not below the local world size " + std::to_string(world));
    }
    // Ranks that would share a GPU: each would bind to, and set_device, another rank's GPU.
    if (!pool.empty() && world > pool.size()) {
      return bad_input(
          std::to_string(world) + " local ranks (" + source + ")",
          "more than the " + std::to_string(pool.size()) + " GPUs this process may use",
          "start at most one rank per GPU, or give each rank its GPU with --gpu");
    }
    plan.local_rank = rank;
    plan.local_world_size = world;
    plan.local_rank_source = source;
    const size_t mine = rank % domains.size();
    if (!pool.empty()) gpus.push_back(pool[mine]);
    // The ranks whose domain is the same CPU set split it: 8 ranks on 8 GPUs over 2 NUMA nodes
    // get 8 disjoint quarters of their node.
    size_t k = 0, m = 0;
    for (unsigned r = 0; r < world; ++r) {
      if (domains[r % domains.size()] == domains[mine]) {
        if (r == rank) k = m;
        ++m;
      }
    }
    plan.cpus = fair_share(model, domains[mine], k, m, plan.warnings, threads);
  } else {
    if (request.gpu_count) {
      if (pool.size() < *request.gpu_count) {
        return bad_input("--gpus " + std::to_string(*request.gpu_count),
                         "only " + std::to_string(pool.size()) + " free accelerators on this host");
      }
      gpus = choose_gpus(model, pool, *request.gpu_count);
    } else {
      gpus = pool;
    }
    if (request.fixed_cpus) {
      plan.cpus = *request.fixed_cpus & allowed;
    } else {
      for (const Accelerator* a : gpus)
        plan.cpus |= local_cpus_of(a->pci, allowed);
      if (plan.cpus.empty()) plan.cpus = allowed;
    }
    threads = count_cores(model, plan.cpus);
  }
  if (plan.cpus.empty()) return bad_input("CPU affinity", "no CPU left for this run");

  for (const Accelerator* a : gpus) {
    plan.gpu_ids.push_back(a->id);
    plan.gpus.push_back(a->pci.address);
    if ((a->pci.local_cpus & allowed).empty() && !a->pci.local_cpus.empty()) {
      plan.warnings.push_back(a->id + ": none of its local CPUs is allowed here; running on " +
                              plan.cpus.to_list());
    }
  }
  plan.mems = memory_nodes(model, gpus, plan.cpus);
  if (!request.allowed_mems.empty()) {
    // Never wider than what the launcher or the container allows (cpuset.mems).
    std::vector<unsigned> kept;
    for (unsigned n : plan.mems) {
      if (std::find(request.allowed_mems.begin(), request.allowed_mems.end(), n) !=
          request.allowed_mems.end())
        kept.push_back(n);
    }
    if (kept.empty() && !plan.mems.empty()) {
      std::vector<std::string> want, may;
      for (unsigned n : plan.mems)
        want.push_back(std::to_string(n));
      for (unsigned n : request.allowed_mems)
        may.push_back(std::to_string(n));
      plan.warnings.push_back("memory not bound: NUMA node " + join(want, ",") +
                              " is not among this process's memory nodes (" + join(may, ",") + ")");
    }
    plan.mems = kept;
  }
  const std::optional<unsigned> order_rank =
      request.local_rank ? request.local_rank : request.order_for_rank;
  visibility_env(model, gpus, *visible, migs, order_rank, plan);
  // HIP's indexes count within ROCr's list: one it inherited would now pick from ours.
  const bool inherited_hip =
      std::any_of(request.inherited_visibility.begin(), request.inherited_visibility.end(),
                  [](const auto& v) { return v.first == "HIP_VISIBLE_DEVICES"; });
  for (const auto& [key, value] : std::vector(plan.env)) {
    if (key == "ROCR_VISIBLE_DEVICES" && inherited_hip) {
      std::vector<std::string> all;
      for (size_t i = 0; i < split(value, ',').size(); ++i)
        all.push_back(std::to_string(i));
      add_env(plan, "HIP_VISIBLE_DEVICES", join(all, ","));
    }
  }
  network_env(model, gpus, request, plan);
  add_env(plan, "OMP_NUM_THREADS", std::to_string(std::max(threads, 1u)));
  if (auto s = hugepage_env(model, request, plan); !s) return s.error();
  return plan;
}

}  // namespace polyaccel
