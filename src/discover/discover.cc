#include "discover/discover.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "core/strings.h"
#include "discover/accel/backends.h"
#include "discover/hwloc_source.h"
#include "discover/links.h"
#include "discover/pci_ids.h"

namespace polyaccel {

std::string filesystem_root(const DiscoverOptions& options) {
  if (!options.topology_xml.empty()) return {};
  if (!options.fsroot.empty()) return options.fsroot;
  return "/";
}

namespace {

// Part of check_fsroot: no FIFO, socket or device (nor a link to one) under DIR's sys/ and proc/,
// which hwloc would open and wait on for ever.
Status check_tree_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // The live host's own root: sysfs and procfs hold no FIFO that hwloc reads, and walking all of
  // /proc would meet every process's pipes.
  if (fs::equivalent(dir, "/", ec)) return Ok{};
  auto kind = [](fs::file_type t) -> const char* {
    switch (t) {
      case fs::file_type::fifo:
        return "a FIFO";
      case fs::file_type::socket:
        return "a socket";
      case fs::file_type::character:
        return "a character device";
      case fs::file_type::block:
        return "a block device";
      default:
        return nullptr;
    }
  };
  // hwloc opens what it reads under sys/ and proc/ with a plain open(2), which waits for ever on
  // a FIFO that nobody writes: the tree is refused before hwloc sees it. Our own readers refuse
  // such files one by one (core/file_io.h).
  constexpr size_t kMaxEntries = 1'000'000;
  size_t entries = 0;
  for (const char* top : {"sys", "proc"}) {
    const fs::path base = fs::path(dir) / top;
    if (!fs::is_directory(base, ec)) continue;
    fs::recursive_directory_iterator it(base, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (++entries > kMaxEntries)
        return bad_input(dir,
                         "holds more than a million files under sys/ and proc/: not a "
                         "gathered sysfs/procfs tree");
      const fs::directory_entry& entry = *it;
      std::error_code type_ec;
      fs::file_type type = entry.symlink_status(type_ec).type();
      std::string what;
      if (type == fs::file_type::symlink) {
        // Where the link leads is what hwloc would open (a dangling link is only absent).
        const char* target = kind(fs::status(entry.path(), type_ec).type());
        if (target) what = std::string("a link to ") + target;
      } else if (const char* k = kind(type)) {
        what = k;
      }
      if (!what.empty()) {
        return bad_input(dir,
                         "holds " + what + " at " +
                             printable(entry.path().lexically_relative(dir).string()) +
                             ": a gathered tree holds regular files (hwloc would wait for "
                             "ever opening it)",
                         "remove it, or gather the tree again with hwloc-gather-topology");
      }
    }
    if (ec) return bad_input(base.string(), "cannot be walked: " + ec.message());
  }
  return Ok{};
}

}  // namespace

Status check_fsroot(const std::string& dir) {
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);  // links followed
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return bad_input(dir, ec.message());  // a loop of links, no permission
  }
  if (!std::filesystem::exists(status)) return bad_input(dir, "no such directory");
  if (!std::filesystem::is_directory(status)) return bad_input(dir, "is not a directory");
  if (!std::filesystem::exists(std::filesystem::path(dir) / "sys/devices/system/cpu", ec)) {
    return bad_input(dir, "holds no sys/devices/system/cpu: not a gathered sysfs/procfs tree",
                     "make one with `hwloc-gather-topology --io NAME` and extract it");
  }
  return check_tree_files(dir);
}

Status check_sources(const DiscoverOptions& options) {
  if (!options.topology_xml.empty() && !options.fsroot.empty()) {
    return bad_input("--topology/--fsroot", "give one source, not both");
  }
  if (!options.fsroot.empty()) return check_fsroot(options.fsroot);
  return Ok{};
}

Result<std::string> export_hwloc_xml(const DiscoverOptions& options) {
  if (!options.topology_xml.empty() && !options.fsroot.empty()) {
    return bad_input("--topology/--fsroot", "give one source, not both");
  }
  return detail::export_hwloc_xml(options);
}

Result<HostModel> discover_host(const DiscoverOptions& options) {
  if (!options.topology_xml.empty() && !options.fsroot.empty()) {
    return bad_input("--topology/--fsroot", "give one source, not both");
  }
  auto loaded = detail::load_from_hwloc(options);
  if (!loaded) return loaded.error();
  HostModel model = std::move(loaded).value();
  detail::complete_from_sysfs(model, filesystem_root(options));
  detail::assign_ids_and_names(model, options.pci_ids_path);
  detail::drop_gpu_memory_from_localities(model);
  model.links = compute_link_matrix(model);
  assign_closest_nics(model);
  const bool live = options.topology_xml.empty() && options.fsroot.empty();
  if (options.backends == BackendMode::on || (options.backends == BackendMode::automatic && live)) {
    auto backends = make_all_backends();
    model.accelerator_backends = merge_accelerators(model, backends);
  }
  return model;
}

namespace detail {

void drop_gpu_memory_from_localities(HostModel& model) {
  // GPU memory, CXL and other CPU-less memory: hwloc gives them the locality of the CPUs they
  // hang off, but no device is local to them and placement must not count them as its nodes.
  // HBM stays: on-package memory of the same die as the device's DRAM node.
  std::set<unsigned> gpu_memory;
  for (const auto& n : model.numa_nodes) {
    if (n.kind == NumaKind::gpu_memory || n.kind == NumaKind::cxl || n.kind == NumaKind::cpuless)
      gpu_memory.insert(n.os_index);
  }
  if (gpu_memory.empty()) return;
  auto drop = [&](std::vector<unsigned>& nodes) {
    std::erase_if(nodes, [&](unsigned n) { return gpu_memory.count(n) > 0; });
  };
  for (auto& a : model.accelerators)
    drop(a.pci.numa_nodes);
  for (auto& n : model.nics)
    drop(n.pci.numa_nodes);
  for (auto& n : model.nvme)
    drop(n.pci.numa_nodes);
  for (auto& h : model.host_bridges)
    drop(h.numa_nodes);
}

void assign_ids_and_names(HostModel& model, const std::string& pci_ids_path) {
  std::set<std::pair<std::uint16_t, std::uint16_t>> wanted;
  auto want = [&](const PciDevice& d) { wanted.insert({d.vendor_id, d.device_id}); };
  for (const auto& a : model.accelerators)
    want(a.pci);
  for (const auto& n : model.nics)
    want(n.pci);
  for (const auto& n : model.nvme)
    want(n.pci);
  PciNames names = load_pci_names(wanted, pci_ids_path);
  auto by_address = [](const auto& a, const auto& b) { return a.pci.address < b.pci.address; };
  std::sort(model.accelerators.begin(), model.accelerators.end(), by_address);
  std::sort(model.nics.begin(), model.nics.end(), by_address);
  std::sort(model.nvme.begin(), model.nvme.end(), by_address);
  auto name_pci = [&](PciDevice& d) {
    if (d.vendor_name.empty()) {
      auto it = names.vendors.find(d.vendor_id);
      if (it != names.vendors.end()) d.vendor_name = it->second;
    }
    if (d.device_name.empty()) {
      auto it = names.devices.find({d.vendor_id, d.device_id});
      if (it != names.devices.end()) d.device_name = it->second;
    }
  };
  auto fallback_name = [](const PciDevice& d) {
    if (!d.device_name.empty()) {
      return d.vendor_name.empty() ? d.device_name : d.vendor_name + " " + d.device_name;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "[%04x:%04x]", d.vendor_id, d.device_id);
    return std::string(buf);
  };
  for (size_t i = 0; i < model.accelerators.size(); ++i) {
    auto& a = model.accelerators[i];
    a.id = "gpu" + std::to_string(i);
    name_pci(a.pci);
    if (a.name.empty()) a.name = fallback_name(a.pci);
  }
  for (size_t i = 0; i < model.nics.size(); ++i) {
    auto& n = model.nics[i];
    n.id = "nic" + std::to_string(i);
    name_pci(n.pci);
    n.name = fallback_name(n.pci);
  }
  for (size_t i = 0; i < model.nvme.size(); ++i) {
    model.nvme[i].id = "nvme" + std::to_string(i);
    name_pci(model.nvme[i].pci);
  }
}

}  // namespace detail
}  // namespace polyaccel
