#include "render/openstack.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "core/byte_size.h"
#include "place/fit.h"

namespace polyaccel::render {

std::string alias_name(const Accelerator& a) {
  return alias_name(a.name, a.pci);
}

std::string alias_name(const std::string& name, const PciDevice& pci) {
  std::string out;
  std::istringstream words(name);
  for (std::string w; words >> w;) {
    // Other characters ("V100-SXM2-16GB", "A100/80GB") separate parts of a word: a hyphen.
    std::string lower;
    for (char c : w) {
      if (std::isalnum(static_cast<unsigned char>(c)))
        lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      else if (!lower.empty() && lower.back() != '-')
        lower += '-';
    }
    while (!lower.empty() && lower.back() == '-')
      lower.pop_back();
    if (lower.empty() || lower == "nvidia" || lower == "amd" || lower == "intel" ||
        lower == "corporation" || lower == "inc")
      continue;
    if (!out.empty()) out += '-';
    out += lower;
  }
  if (!out.empty()) return out;
  char buf[32];
  std::snprintf(buf, sizeof buf, "accel-%04x-%04x", pci.vendor_id, pci.device_id);
  return buf;
}

namespace {

// Nova's spelling of a page size: "1GB" is 1 GiB to Nova, "2MB" 2 MiB.
std::string nova_page_size(std::uint64_t bytes) {
  if (bytes % (std::uint64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + "GB";
  if (bytes % (std::uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "MB";
  return std::to_string(bytes >> 10);
}

// Places `request` on the empty host until the fit refuses; returns how many fit and the free
// dedicated PUs left.
std::pair<unsigned, unsigned> tile(const place::HostView& view, const place::Request& request,
                                   unsigned limit) {
  auto usage = place::usage_of(view, {});
  if (!usage) return {0, 0};
  unsigned placed = 0;
  while (placed < limit) {
    auto r = place::fit(view, *usage, request);
    if (!r.fit) break;
    place::add_usage(view, r.placement, *usage);
    ++placed;
  }
  unsigned free = 0;
  for (size_t i = 0; i < view.cells.size(); ++i)
    free += (view.cells[i].pcpus - usage->cells[i].held).count();
  return {placed, free};
}

// How guests of one flavor share the host: how many NUMA cells each guest has and how many
// guests each used node holds (nodes absent from the map hold none).
struct Layout {
  unsigned cells_per_guest = 0;
  std::map<unsigned, unsigned> guests_on;  // node -> guests with a cell there
};

Layout even_layout(const place::HostView& view, unsigned guests) {
  Layout l;
  const unsigned cells = static_cast<unsigned>(view.cells.size());
  if (cells % guests == 0) {
    l.cells_per_guest = cells / guests;
    for (const auto& c : view.cells)
      l.guests_on[c.node] = 1;
  } else if (guests % cells == 0) {
    l.cells_per_guest = 1;
    for (const auto& c : view.cells)
      l.guests_on[c.node] = guests / cells;
  }
  return l;
}

Layout accelerator_layout(const std::map<unsigned, unsigned>& on_node, unsigned n) {
  Layout l;
  if (on_node.empty()) return l;
  const unsigned a = on_node.begin()->second;
  bool same =
      std::all_of(on_node.begin(), on_node.end(), [&](const auto& e) { return e.second == a; });
  bool divisible =
      std::all_of(on_node.begin(), on_node.end(), [&](const auto& e) { return e.second % n == 0; });
  if (divisible) {  // each guest on one node with its n accelerators
    l.cells_per_guest = 1;
    for (const auto& [node, count] : on_node)
      l.guests_on[node] = count / n;
  } else if (same && n % a == 0) {  // each guest across n / a accelerator nodes
    l.cells_per_guest = n / a;
    for (const auto& [node, count] : on_node)
      l.guests_on[node] = 1;
  }
  return l;
}

// The flavor a layout gives (vcpus 0 when a node has no whole core or page left per guest),
// checked by tiling the empty host.
Result<Flavor> flavor_for(const place::HostView& view, const FlavorPlan& plan, const Layout& layout,
                          unsigned n, unsigned guests, std::uint64_t page) {
  Flavor f;
  unsigned cpus = ~0u;
  std::uint64_t memory = ~std::uint64_t{0};
  for (const auto& c : view.cells) {
    auto it = layout.guests_on.find(c.node);
    if (it == layout.guests_on.end() || it->second == 0) continue;
    unsigned share = c.pcpus.count() / it->second;
    if (c.threads_per_core > 1) share -= share % c.threads_per_core;  // whole cores
    cpus = std::min(cpus, share);
    std::uint64_t pages = 0;
    for (const auto& pool : c.pools) {
      if (pool.size_bytes == page) pages = pool.total;
    }
    memory = std::min(memory, pages / it->second * page);
  }
  memory -= memory % (std::uint64_t{1} << 20);
  if (cpus == 0 || cpus == ~0u || memory == 0) return f;
  f.accelerators = n;
  f.numa_nodes = layout.cells_per_guest;
  f.vcpus = cpus * layout.cells_per_guest;
  f.memory_bytes = memory * layout.cells_per_guest;
  f.name = plan.alias.name + "-x" + std::to_string(n);
  f.extra_specs = {{"hw:cpu_policy", "dedicated"},
                   {"hw:numa_nodes", std::to_string(layout.cells_per_guest)},
                   {"hw:mem_page_size", nova_page_size(page)},
                   {"hw:emulator_threads_policy", "share"},
                   {"pci_passthrough:alias", plan.alias.name + ":" + std::to_string(n)},
                   {"hw:pci_numa_affinity_policy", "required"}};
  place::RequestInput input{f.vcpus, f.memory_bytes, f.extra_specs};
  auto request = place::parse_request(input, {plan.alias});
  if (!request) return request.error();
  auto [placed, free] = tile(view, *request, guests + 1);
  f.guests_per_host = placed;
  f.free_pus_after = free;
  // An RDMA NIC beside each accelerator when every guest can still have one: in Nova's alias
  // (Nova passes no device otherwise), at the closest level polyaccel's own spec can hold.
  if (!plan.nic_alias) return f;
  const std::string both = plan.alias.name + ":" + std::to_string(n) + "," + plan.nic_alias->name +
                           ":" + std::to_string(n);
  for (const char* level : {"pix", "pxb", "phb", "node"}) {
    auto with_nics = input;
    for (auto& [k, v] : with_nics.extra_specs) {
      if (k == "pci_passthrough:alias") v = both;
    }
    with_nics.extra_specs.emplace_back("polyaccel:nic_affinity", level);
    auto nic_request = place::parse_request(with_nics, {plan.alias, *plan.nic_alias});
    if (!nic_request) break;
    if (tile(view, *nic_request, guests + 1).first == placed) {
      f.extra_specs = with_nics.extra_specs;
      break;
    }
  }
  return f;
}

// The page size: the option's, else the largest size the host reserves pages of, else 1 GiB.
std::uint64_t flavor_page_size(const HostModel& model, const FlavorOptions& options) {
  if (options.page_size_bytes) return *options.page_size_bytes;
  std::uint64_t page = 0;
  for (const auto& n : model.numa_nodes) {
    for (const auto& h : n.hugepages) {
      if (h.total > 0) page = std::max(page, h.size_bytes);
    }
  }
  return page ? page : std::uint64_t{1} << 30;
}

}  // namespace

Status check_flavor_options(const HostModel& model, const FlavorOptions& options) {
  const std::uint64_t page = flavor_page_size(model, options);
  const std::uint64_t base = model.page_size ? model.page_size : 4096;
  if (page <= base || (page & (page - 1)) != 0)
    return bad_input("--page-size " + format_byte_size(page),
                     "is not a huge page size (a power of two above the base page)");
  for (const auto& n : model.numa_nodes) {
    if (n.cpus.empty()) continue;
    unsigned cores = 0;
    for (const auto& core : model.cores)
      cores += n.cpus.contains(core.pus) ? 1 : 0;
    if (options.reserve_cores_per_node >= cores)
      return bad_input("--reserve-cores-per-node " + std::to_string(options.reserve_cores_per_node),
                       "leaves no core for guests on NUMA node " + std::to_string(n.os_index) +
                           ", which has " + std::to_string(cores));
    if (page > n.memory_bytes) {
      // The page alone does not fit: the page size is at fault, whatever the reserve.
      return bad_input(options.page_size_bytes ? "--page-size " + format_byte_size(page)
                                               : "page size " + format_byte_size(page) +
                                                     " (the default; give --page-size)",
                       "is larger than NUMA node " + std::to_string(n.os_index) + "'s memory (" +
                           format_byte_size(n.memory_bytes) + ")");
    }
    if (options.reserve_memory_per_node > n.memory_bytes - page)
      return bad_input(
          "--reserve-memory-per-node " + format_byte_size(options.reserve_memory_per_node),
          "leaves no " + format_byte_size(page) + " page for guests on NUMA node " +
              std::to_string(n.os_index) + ", which has " + format_byte_size(n.memory_bytes));
  }
  return Ok{};
}

Result<FlavorPlan> plan_flavors(const HostModel& original, const FlavorOptions& options) {
  FlavorPlan plan;
  std::map<std::pair<std::uint16_t, std::uint16_t>, std::vector<const Accelerator*>> models;
  for (const auto& a : original.accelerators)
    models[{a.pci.vendor_id, a.pci.device_id}].push_back(&a);
  if (models.empty()) return bad_input("host", "has no accelerator to build flavors for");
  auto most = std::max_element(models.begin(), models.end(), [](const auto& a, const auto& b) {
    return a.second.size() < b.second.size();
  });
  const Accelerator& sample = *most->second.front();
  plan.accelerator_name = sample.name;
  plan.accelerator_count = static_cast<unsigned>(most->second.size());
  plan.alias.name = alias_name(sample);
  plan.alias.vendor_id = sample.pci.vendor_id;
  plan.alias.device_id = sample.pci.device_id;
  plan.alias.numa_policy = place::PciNumaPolicy::required;
  // The NIC model: the most numerous among the RDMA NICs closest to the accelerators.
  std::map<std::pair<std::uint16_t, std::uint16_t>, std::vector<const Nic*>> nics;
  for (const auto* a : most->second) {
    for (const auto& id : a->closest_nics) {
      const Nic* nic = original.nic(id);
      if (nic && nic->rdma_capable()) nics[{nic->pci.vendor_id, nic->pci.device_id}].push_back(nic);
    }
  }
  if (!nics.empty()) {
    auto nic = std::max_element(nics.begin(), nics.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    const Nic& sample_nic = *nic->second.front();
    place::PciAlias a;
    a.name = alias_name(sample_nic.name, sample_nic.pci);
    if (a.name == plan.alias.name) a.name += "-nic";
    a.vendor_id = sample_nic.pci.vendor_id;
    a.device_id = sample_nic.pci.device_id;
    a.numa_policy = place::PciNumaPolicy::required;
    plan.nic_alias = a;
    plan.nic_name = sample_nic.name;
    plan.nic_device_type = sample_nic.pci.sriov ? "type-PF" : "type-PCI";
  }
  if (models.size() > 1)
    plan.notes.push_back("the host has several accelerator models; flavors are for the " +
                         std::to_string(plan.accelerator_count) + " x " + sample.name);

  if (auto ok = check_flavor_options(original, options); !ok) return ok.error();
  // The host after the reserve: the first cores of each node for the host, and the huge pages
  // the flavors need: all the memory left on each node, in pages of the chosen size.
  HostModel model = original;
  CpuSet reserved;
  const std::uint64_t page = flavor_page_size(original, options);
  plan.page_size_bytes = page;
  std::vector<std::string> short_nodes;
  std::uint64_t fewest_short_pages = UINT64_MAX;
  for (auto& n : model.numa_nodes) {
    if (n.cpus.empty()) continue;
    unsigned taken = 0;
    for (const auto& core : model.cores) {
      if (taken == options.reserve_cores_per_node) break;
      if (!n.cpus.contains(core.pus)) continue;
      reserved |= core.pus;
      ++taken;
    }
    const std::uint64_t usable = n.memory_bytes - options.reserve_memory_per_node;
    // Other huge page pools stay as the host has them: their memory is not the guests'.
    std::uint64_t other = 0;
    for (const auto& h : n.hugepages) {
      if (h.size_bytes != page) other += h.size_bytes * h.total;
    }
    const std::uint64_t pages = usable > other ? (usable - other) / page : 0;
    plan.hugepages_per_node.emplace_back(n.os_index, pages);
    auto pool = std::find_if(n.hugepages.begin(), n.hugepages.end(),
                             [&](const Hugepages& h) { return h.size_bytes == page; });
    const std::uint64_t now = pool == n.hugepages.end() ? 0 : pool->total;
    if (now < pages) {
      short_nodes.push_back(std::to_string(n.os_index));
      fewest_short_pages = std::min(fewest_short_pages, pages);
    }
    if (pool == n.hugepages.end()) {
      n.hugepages.push_back({page, pages, std::nullopt});
    } else {
      pool->total = pages;
    }
  }
  // The what-if options of audit and place for the pages, in the sizes they parse ("495GiB").
  auto option_size = [](std::uint64_t bytes) {
    if (bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
    return std::to_string(bytes >> 20) + "MiB";
  };
  const std::string what_if =
      option_size(fewest_short_pages * page) + " --hugepage-size " + option_size(page);
  if (!short_nodes.empty())
    plan.notes.push_back("NUMA node(s) " +
                         [&] {
                           std::string list;
                           for (const auto& n : short_nodes)
                             list += (list.empty() ? "" : ",") + n;
                           return list;
                         }() +
                         " reserve fewer " + format_byte_size(page) +
                         " pages than the flavors need: reserve the huge pages per NUMA node of "
                         "this plan before booting guests (polyaccel audit --hugepages-per-node " +
                         what_if +
                         " --emit DIR); to check a flavor before, polyaccel place "
                         "--flavor FILE --hugepages-per-node " +
                         what_if);
  plan.policy.cpu_dedicated_set = model.pus - reserved;
  plan.policy.cpu_shared_set = reserved;
  plan.policy.reserved_memory_per_node = options.reserve_memory_per_node;
  auto view = place::build_host_view(model, plan.policy);
  if (!view) return view.error();

  // Accelerators of the model on each NUMA node with CPUs.
  std::map<unsigned, unsigned> on_node;
  for (const auto* a : most->second) {
    for (const auto& d : view->devices) {
      if (d.pci_bus_id == a->pci.address.to_string() && d.numa_node) ++on_node[*d.numa_node];
    }
  }
  const unsigned total = plan.accelerator_count;
  for (unsigned n = 1; n <= total; n *= 2) {
    if (total % n != 0) continue;
    const unsigned guests = total / n;
    // The whole host split evenly first; then only the nodes that hold the accelerators (a host
    // whose accelerators sit on one socket).
    std::optional<Flavor> best;
    for (const Layout& layout : {even_layout(*view, guests), accelerator_layout(on_node, n)}) {
      if (layout.guests_on.empty()) continue;
      auto f = flavor_for(*view, plan, layout, n, guests, page);
      if (!f) return f.error();
      if (f->vcpus == 0) continue;
      if (!best || f->guests_per_host > best->guests_per_host) best = std::move(*f);
      if (best->guests_per_host == guests) break;
    }
    if (!best) {
      plan.notes.push_back(std::to_string(n) +
                           "-accelerator guests: no even split of the NUMA "
                           "nodes' CPUs and huge pages");
      continue;
    }
    if (best->guests_per_host != guests)
      plan.notes.push_back(best->name + ": the fit placed " +
                           std::to_string(best->guests_per_host) + " guests, not " +
                           std::to_string(guests));
    plan.flavors.push_back(std::move(*best));
  }
  // The NIC's alias only where a flavor asks for it (too few NICs for every guest: none does).
  if (plan.nic_alias &&
      std::none_of(plan.flavors.begin(), plan.flavors.end(), [&](const Flavor& f) {
        for (const auto& [k, v] : f.extra_specs) {
          if (k == "pci_passthrough:alias" && v.find("," + plan.nic_alias->name + ":") != v.npos)
            return true;
        }
        return false;
      }))
    plan.nic_alias.reset();
  return plan;
}

std::string openstack_commands(const FlavorPlan& plan) {
  std::ostringstream o;
  char ids[32];
  std::snprintf(ids, sizeof ids, "\"%04x\", \"product_id\": \"%04x\"", plan.alias.vendor_id,
                *plan.alias.device_id);
  o << "# " << plan.accelerator_count << " x " << plan.accelerator_name << "\n"
    << "# nova.conf on this compute host:\n"
    << "#   [compute]\n"
    << "#   cpu_dedicated_set = " << plan.policy.cpu_dedicated_set->to_list() << "\n"
    << "#   cpu_shared_set = " << plan.policy.cpu_shared_set->to_list() << "\n"
    << "#   reserved_host_memory_mb = "
    << (plan.policy.reserved_memory_per_node >> 20) * plan.hugepages_per_node.size() << "\n"
    << "#   [pci]\n"
    << "#   device_spec = {\"vendor_id\": " << ids << "}\n"
    << "#   alias = {\"name\": \"" << plan.alias.name << "\", \"vendor_id\": " << ids
    << ", \"device_type\": \"type-PCI\", \"numa_policy\": \"required\"}\n";
  if (plan.nic_alias) {
    char nic_ids[32];
    std::snprintf(nic_ids, sizeof nic_ids, "\"%04x\", \"product_id\": \"%04x\"",
                  plan.nic_alias->vendor_id, *plan.nic_alias->device_id);
    o << "#   # the RDMA NIC beside each accelerator (" << plan.nic_name << ")\n"
      << "#   device_spec = {\"vendor_id\": " << nic_ids << "}\n"
      << "#   alias = {\"name\": \"" << plan.nic_alias->name << "\", \"vendor_id\": " << nic_ids
      << ", \"device_type\": \"" << plan.nic_device_type << "\", \"numa_policy\": \"required\"}\n";
  }
  o << "# extra specs: hw:* and pci_passthrough:alias are Nova's; polyaccel:* are polyaccel's "
       "own,\n"
    << "# ignored by Nova and checked by polyaccel place --flavor\n"
    << "# huge pages of " << format_byte_size(plan.page_size_bytes) << " per NUMA node:\n";
  for (const auto& [node, pages] : plan.hugepages_per_node)
    o << "#   node " << node << ": " << pages << "\n";
  for (const auto& note : plan.notes)
    o << "# note: " << note << "\n";
  for (const auto& f : plan.flavors) {
    o << "\n# " << f.accelerators << " accelerator(s), " << f.guests_per_host << " per host, "
      << f.free_pus_after << " dedicated PUs left\n"
      << "openstack flavor create --vcpus " << f.vcpus << " --ram " << (f.memory_bytes >> 20)
      << " --disk 0";
    for (const auto& [k, v] : f.extra_specs)
      o << " \\\n    --property " << k << "=" << v;
    o << " \\\n    " << f.name << "\n";
  }
  return o.str();
}

nlohmann::json to_json(const FlavorPlan& plan) {
  nlohmann::json j;
  j["schema_version"] = kFlavorsSchemaVersion;
  char vendor[8], device[8];
  std::snprintf(vendor, sizeof vendor, "%04x", plan.alias.vendor_id);
  std::snprintf(device, sizeof device, "%04x", plan.alias.device_id.value_or(0));
  j["pci_alias"] = {{"name", plan.alias.name},
                    {"vendor_id", vendor},
                    {"product_id", device},
                    {"numa_policy", "required"}};
  j["pci_alias"]["device_type"] = "type-PCI";
  if (plan.nic_alias) {
    std::snprintf(vendor, sizeof vendor, "%04x", plan.nic_alias->vendor_id);
    std::snprintf(device, sizeof device, "%04x", plan.nic_alias->device_id.value_or(0));
    j["nic_pci_alias"] = {{"name", plan.nic_alias->name}, {"vendor_id", vendor},
                          {"product_id", device},         {"device_type", plan.nic_device_type},
                          {"numa_policy", "required"},    {"nic", plan.nic_name}};
  } else {
    j["nic_pci_alias"] = nullptr;
  }
  j["accelerator"] = {{"name", plan.accelerator_name}, {"count", plan.accelerator_count}};
  j["cpu_dedicated_set"] = plan.policy.cpu_dedicated_set->to_list();
  j["cpu_shared_set"] = plan.policy.cpu_shared_set->to_list();
  j["reserved_memory_per_node_bytes"] = plan.policy.reserved_memory_per_node;
  j["page_size_bytes"] = plan.page_size_bytes;
  j["hugepages_per_node"] = nlohmann::json::array();
  for (const auto& [node, pages] : plan.hugepages_per_node)
    j["hugepages_per_node"].push_back({{"numa_node", node}, {"pages", pages}});
  j["flavors"] = nlohmann::json::array();
  for (const auto& f : plan.flavors) {
    nlohmann::json fj;
    fj["name"] = f.name;
    fj["accelerators"] = f.accelerators;
    fj["vcpus"] = f.vcpus;
    fj["ram_mib"] = f.memory_bytes >> 20;
    fj["numa_nodes"] = f.numa_nodes;
    fj["extra_specs"] = nlohmann::json::object();
    for (const auto& [k, v] : f.extra_specs)
      fj["extra_specs"][k] = v;
    fj["guests_per_host"] = f.guests_per_host;
    fj["free_pus_after"] = f.free_pus_after;
    j["flavors"].push_back(fj);
  }
  j["notes"] = plan.notes;
  return j;
}

}  // namespace polyaccel::render
