// `polyaccel place`: fit a request (command-line options, a flavor file, extra specs) on this
// host with the recorded allocations; print it for people, as JSON or as libvirt XML; with
// --commit, reserve it by name in the allocation state.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/hugepage_options.h"
#include "core/byte_size.h"
#include "core/file_io.h"
#include "core/json.h"
#include "place/allocation_store.h"
#include "place/fit.h"
#include "place/flavor_file.h"
#include "render/libvirt.h"

namespace polyaccel::cli {

namespace {

Result<place::HostPolicy> host_policy(const HostPolicyOptions& o) {
  place::HostPolicy p;
  auto cpus = [](const std::string& option, const std::string& text) -> Result<CpuSet> {
    auto s = CpuSet::parse_list(text);
    if (!s || s->empty())
      return bad_input(option_input(option) + " " + text, "is not a CPU list like 2-27,30");
    return *s;
  };
  if (!o.cpu_dedicated_set.empty()) {
    auto s = cpus("--cpu-dedicated-set", o.cpu_dedicated_set);
    if (!s) return s.error();
    p.cpu_dedicated_set = *s;
  }
  if (!o.cpu_shared_set.empty()) {
    auto s = cpus("--cpu-shared-set", o.cpu_shared_set);
    if (!s) return s.error();
    p.cpu_shared_set = *s;
  }
  // Finite and bounded: nan passes a "<= 0" test, and inf times the PUs is no host size.
  auto ratio_ok = [](double r) { return std::isfinite(r) && r > 0 && r <= 1000; };
  if (!ratio_ok(o.cpu_allocation_ratio))
    return bad_input(option_input("--cpu-allocation-ratio"),
                     "must be a number above 0, at most 1000");
  if (!ratio_ok(o.ram_allocation_ratio))
    return bad_input(option_input("--ram-allocation-ratio"),
                     "must be a number above 0, at most 1000");
  p.cpu_allocation_ratio = o.cpu_allocation_ratio;
  p.ram_allocation_ratio = o.ram_allocation_ratio;
  if (!o.reserved_memory_per_node.empty()) {
    auto b = parse_byte_size(o.reserved_memory_per_node);
    if (!b)
      return bad_input(
          option_input("--reserved-memory-per-node") + " " + o.reserved_memory_per_node,
          "is not a size");
    p.reserved_memory_per_node = *b;
  }
  return p;
}

// The largest request this host could ever hold: every PU, overcommitted by the CPU allocation
// ratio. Larger ones are refused before anything proportional to them is built (a request for
// 4000000000 vCPUs would otherwise be laid out vCPU by vCPU).
std::uint64_t largest_vcpu_request(const HostModel& model, const place::HostPolicy& policy) {
  double ratio = std::max(1.0, policy.cpu_allocation_ratio);
  return static_cast<std::uint64_t>(static_cast<double>(model.pus.count()) * ratio);
}

Result<place::Request> build_request(const PlaceOptions& o, std::uint64_t max_vcpus) {
  place::RequestInput input;
  std::vector<place::PciAlias> aliases;
  if (!o.flavor_file.empty()) {
    auto text = read_input_file(o.flavor_file, kMaxConfigFileBytes, "flavor file");
    if (!text) return text.error();
    auto flavor = place::parse_flavor_file(o.flavor_file, *text);
    if (!flavor) return flavor.error();
    input = flavor->request;
    aliases = flavor->aliases;
  }
  if (!o.pci_alias_file.empty()) {
    auto text = read_input_file(o.pci_alias_file, kMaxConfigFileBytes, "PCI alias file");
    if (!text) return text.error();
    auto parsed = place::parse_pci_alias_file(o.pci_alias_file, *text);
    if (!parsed) return parsed.error();
    aliases.insert(aliases.end(), parsed->begin(), parsed->end());
  }
  for (const auto& a : o.pci_aliases) {
    auto parsed = place::parse_pci_alias_option(a);
    if (!parsed) return parsed.error();
    aliases.push_back(*parsed);
  }
  if (o.vcpus) {
    if (*o.vcpus == 0) return bad_input("--vcpus 0", "must be 1 or more");
    input.vcpus = *o.vcpus;
  }
  if (!o.memory.empty()) {
    auto b = parse_byte_size(o.memory);
    if (!b) return bad_input("--memory " + o.memory, "is not a size like 64GiB");
    // A bare number is bytes: "4096" is 4 KiB, not the 4096 MiB a flavor's RAM would mean.
    if (*b % (std::uint64_t{1} << 20) != 0)
      return bad_input("--memory " + o.memory,
                       "is " + std::to_string(*b) + " bytes, not a whole number of MiB",
                       "give a unit: --memory " + o.memory + "MiB");
    if (*b == 0) return bad_input("--memory " + o.memory, "must be more than 0");
    input.memory_bytes = *b;
  }
  for (const auto& spec : o.specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return bad_input("--spec " + spec, "expected KEY=VALUE", "e.g. hw:cpu_policy=dedicated");
    input.extra_specs.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
  }
  if (input.vcpus == 0)
    return bad_input("--vcpus", "is missing", "give --vcpus N or --flavor FILE");
  if (input.vcpus > max_vcpus) {
    std::string what = o.vcpus ? "--vcpus " + std::to_string(input.vcpus)
                               : o.flavor_file + ": vcpus " + std::to_string(input.vcpus);
    return bad_input(what, "is more than this host can ever hold (" + std::to_string(max_vcpus) +
                               " vCPUs: its PUs times the CPU allocation ratio)");
  }
  if (input.memory_bytes == 0)
    return bad_input("--memory", "is missing", "give --memory SIZE or --flavor FILE");
  return place::parse_request(input, aliases);
}

void print_placement(const place::Placement& p, std::ostream& out) {
  if (p.cells.empty()) {
    out << "no guest NUMA topology: " << p.vcpus << " vCPUs float over the shared PUs, "
        << format_byte_size(p.memory_bytes) << " anywhere\n";
  }
  for (const auto& c : p.cells) {
    out << "guest cell " << c.guest_cell << " -> NUMA node " << c.host_numa_node << ": "
        << c.vcpus.size() << " vCPUs, " << format_byte_size(c.memory_bytes);
    out << (c.page_size_bytes ? " in " + format_byte_size(c.page_size_bytes) + " pages"
                              : " (no page size)")
        << "\n";
    if (!c.pinning.empty()) {
      out << "  pinned:";
      for (const auto& [vcpu, pu] : c.pinning)
        out << " " << vcpu << "->" << pu;
      out << "\n";
    }
    if (!c.shared_vcpus.empty()) {
      CpuSet v;
      for (unsigned x : c.shared_vcpus)
        v.set(x);
      out << "  shared: vCPUs " << v.to_list() << " float over PUs " << c.shared_pus.to_list()
          << "\n";
    }
  }
  if (!p.emulator_pus.empty()) out << "emulator threads: PUs " << p.emulator_pus.to_list() << "\n";
  for (const auto& d : p.devices) {
    out << "device " << d.pci_bus_id << " " << (d.id.empty() ? "-" : d.id) << " (" << d.alias
        << ") NUMA " << (d.numa_node ? std::to_string(*d.numa_node) : std::string("-"))
        << " -> guest cell " << d.guest_cell << "\n";
  }
}

// What to try when huge pages refused the guest, as options this command takes (the what-if
// first: it tells whether reserving the pages would do).
std::vector<std::string> page_what_ifs(const place::Request& r, size_t host_cells) {
  std::uint64_t cell_memory = 0;
  for (const auto& c : r.cells)
    cell_memory = std::max(cell_memory, c.memory_bytes);
  const bool exact = r.page_size == place::PageSizeRequest::exact;
  std::vector<std::string> out;
  out.push_back("--hugepages-per-node " +
                (exact ? hugepage_option_size(cell_memory) + " --hugepage-size " +
                             hugepage_option_size(r.page_size_bytes)
                       : std::string("SIZE --hugepage-size SIZE")) +
                ": fit as if every NUMA node had reserved that much (then reserve it: polyaccel "
                "audit with the same options and --emit DIR)");
  if (exact && r.page_size_bytes > (std::uint64_t{2} << 20))
    out.push_back("--spec hw:mem_page_size=2MiB: a smaller page size");
  if (r.page_size != place::PageSizeRequest::any)
    out.push_back("--spec hw:mem_page_size=any: any page size with room, the base page too");
  if (r.cells.size() * 2 <= host_cells)
    out.push_back("--spec hw:numa_nodes=" + std::to_string(r.cells.size() * 2) +
                  ": the memory split over more NUMA nodes");
  out.push_back("--memory SIZE below " + format_byte_size(r.memory_bytes) + ": less memory");
  return out;
}

}  // namespace

int run_place(const GlobalOptions& g, const PlaceOptions& o, std::ostream& out) {
  auto policy = host_policy(o.host);
  if (!policy) return fail(policy.error());
  auto hugepages = parse_hugepage_options(o.hugepages);
  if (!hugepages) return fail(hugepages.error());
  if (hugepages->per_node_bytes > 0 && o.commit) {
    return fail(bad_input("--commit", "reserves on pages --hugepages-per-node only assumes",
                          "reserve the pages on the host first (polyaccel audit --emit)"));
  }
  auto model = discover_host(g.discover);
  if (!model) return fail(model.error());
  // The what-if (as audit's): the fit as if every node had reserved the pages already.
  assume_hugepages(*model, *hugepages);
  auto request = build_request(o, largest_vcpu_request(*model, *policy));
  if (!request) return fail(request.error());
  if (o.commit && o.name.empty())
    return fail(bad_input("--commit", "needs --name NAME to record the placement by"));
  if (!o.name.empty()) {
    if (auto ok = place::check_placement_name(o.name, "--name"); !ok) return fail(ok.error());
  }
  place::Strategy strategy = place::Strategy::polyaccel;
  if (o.strategy == "first-fit") strategy = place::Strategy::first_fit;
  auto view = place::build_host_view(*model, *policy);
  if (!view) return fail(view.error());

  place::AllocationStore store(o.state, libvirt_status_dir(g, o.libvirt_domains));
  place::FitResult result;
  auto decide = [&](place::AllocationState& state) -> Result<bool> {
    if (!state.host.empty() && !view->hostname.empty() && state.host != view->hostname)
      return bad_input(
          o.state,
          "records placements of host '" + state.host + "', this is '" + view->hostname + "'",
          "point --state at this host's file");
    if (o.commit && state.find(o.name))
      return bad_input("--name " + o.name, "is already allocated in " + o.state,
                       "release it first or choose another name");
    for (const auto& clash : state.name_clashes)
      std::cerr << "warning: " << clash << "\n";
    auto r = place::fit(*view, state.all(), *request, strategy);
    if (!r) return bad_input(o.state, r.error().message(), "move the state file away");
    result = std::move(*r);
    if (!result.fit || !o.commit) return false;
    result.placement.name = o.name;
    if (state.host.empty()) state.host = view->hostname;
    state.placements.push_back(result.placement);
    return true;
  };
  if (o.commit) {
    if (auto s = store.update(decide); !s) return fail(s.error());
  } else {
    auto state = store.load();
    if (!state) return fail(state.error());
    if (auto d = decide(*state); !d) return fail(d.error());
  }
  std::string xml;
  if (o.libvirt && result.fit) {
    render::LibvirtOptions lo;
    if (!o.name.empty()) lo.name = o.name;
    for (const auto& core : model->cores)
      lo.host_cores.push_back(core.pus);
    if (model->architecture == "ppc64le") {
      lo.arch = "ppc64le";
      lo.machine = "pseries";
    } else if (model->architecture == "aarch64") {
      lo.arch = "aarch64";
      lo.machine = "virt";
    }
    xml = render::libvirt_domain_xml(result.placement, lo);
  }
  if (g.json) {
    nlohmann::json j;
    j["schema_version"] = kPlaceSchemaVersion;
    j["host"] = view->hostname;
    j["fit"] = result.fit;
    j["reason"] = result.fit ? nlohmann::json() : nlohmann::json(result.reason);
    j["committed"] = o.commit && result.fit;
    j["name"] = o.name.empty() ? nlohmann::json() : nlohmann::json(o.name);
    if (result.fit) {
      nlohmann::json p = place::to_json(result.placement);
      for (const char* key : {"cpu_policy", "cells", "emulator_pus", "held_pus", "devices"})
        j[key] = p[key];
    } else {
      j["cells"] = nlohmann::json::array();
      j["devices"] = nlohmann::json::array();
    }
    if (!xml.empty()) j["libvirt_xml"] = xml;
    if (result.short_of_pages) j["what_if"] = page_what_ifs(*request, view->cells.size());
    out << json_text(j) << "\n";
  } else if (!xml.empty()) {
    out << xml;
  } else if (result.fit) {
    out << "fit on " << (view->hostname.empty() ? "this host" : view->hostname) << "\n";
    print_placement(result.placement, out);
    if (o.commit) out << "committed as " << o.name << " in " << o.state << "\n";
  } else {
    // With --libvirt stdout is the domain XML (often redirected to a file): the refusal goes to
    // stderr.
    std::ostream& to = o.libvirt ? std::cerr : out;
    to << "No fit: " << result.reason << "\n";
    if (result.short_of_pages) {
      to << "Short of huge pages; to try:\n";
      for (const auto& w : page_what_ifs(*request, view->cells.size()))
        to << "  " << w << "\n";
    }
  }
  return result.fit ? kExitOk : kExitFindings;
}

}  // namespace polyaccel::cli
