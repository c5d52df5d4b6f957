// What hwloc does not keep, read straight from sysfs/procfs under a root (node_exporter's
// --path.sysfs habit): free hugepages, PCIe link speed and width, NVIDIA GPU memory nodes.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/file_io.h"
#include "core/number.h"
#include "discover/hwloc_source.h"
#include "discover/sriov.h"

namespace polyaccel::detail {

namespace fs = std::filesystem;

void read_hugepages(NumaNode& node, const fs::path& root) {
  fs::path dir =
      root / "sys/devices/system/node" / ("node" + std::to_string(node.os_index)) / "hugepages";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<Hugepages> found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();  // hugepages-2048kB
    if (name.rfind("hugepages-", 0) != 0 || name.size() < 13) continue;
    std::string digits = name.substr(10, name.size() - 12);  // between "hugepages-" and "kB"
    auto kib = parse_integer<std::uint64_t>(digits, name, 1, std::uint64_t{1} << 44);
    if (!kib || name.compare(name.size() - 2, 2, "kB") != 0) continue;
    // Counts as the kernel writes them, and no more pages than bytes can count: a negative or
    // wider value is no reading, never wrapped.
    const std::uint64_t max_pages = ~std::uint64_t{0} / (*kib * 1024);
    auto count = [&](const char* file) -> std::optional<std::uint64_t> {
      auto line = read_first_line(entry.path() / file);
      if (!line) return std::nullopt;
      auto v = parse_integer<std::uint64_t>(*line, file, 0, max_pages);
      return v ? std::optional<std::uint64_t>(*v) : std::nullopt;
    };
    auto total = count("nr_hugepages");
    if (!total) continue;
    found.push_back(Hugepages{*kib * 1024, *total, count("free_hugepages")});
  }
  if (found.empty()) return;
  std::sort(found.begin(), found.end(),
            [](const Hugepages& a, const Hugepages& b) { return a.size_bytes < b.size_bytes; });
  node.hugepages = std::move(found);
}

void read_pci_link(PciDevice& d, const fs::path& root) {
  fs::path dir = root / "sys/bus/pci/devices" / d.address.to_string();
  // A file sysfs does not have keeps what hwloc said.
  if (auto v = read_link_speed(dir / "current_link_speed")) d.link.speed_gts = *v;
  if (auto v = read_link_speed(dir / "max_link_speed")) d.link.max_speed_gts = *v;
  if (auto v = read_link_width(dir / "current_link_width")) d.link.width = *v;
  if (auto v = read_link_width(dir / "max_link_width")) d.link.max_width = *v;
}

std::optional<double> read_link_speed(const fs::path& file) {
  auto line = read_first_line(file);
  if (!line) return std::nullopt;
  // The number before " GT/s"; "Unknown" (link down, or a speed the kernel does not name) is 0.
  std::string_view text = *line;
  auto v = parse_finite(text.substr(0, text.find(' ')), file.string(), 0, 256);
  return v ? *v : 0.0;
}

std::optional<unsigned> read_link_width(const fs::path& file) {
  auto line = read_first_line(file);
  if (!line) return std::nullopt;
  auto w = parse_integer<unsigned>(*line, file.string(), 1, 32);
  return w ? *w : 0u;
}

namespace {

// The NVIDIA driver says which NUMA node holds a coherent GPU's memory (POWER9 + V100, Grace).
void read_gpu_memory_node(Accelerator& a, HostModel& model, const fs::path& root) {
  auto text =
      read_text_file(root / "proc/driver/nvidia/gpus" / a.pci.address.to_string() / "numa_status");
  if (!text) return;
  size_t pos = text->find("Node:");
  if (pos == std::string::npos) return;
  size_t begin = text->find_first_not_of(" \t", pos + 5);
  size_t stop = begin == std::string::npos ? begin : text->find_first_not_of("0123456789", begin);
  if (begin == std::string::npos) return;
  auto parsed = parse_integer<unsigned>(
      std::string_view(*text).substr(begin, stop == std::string::npos ? stop : stop - begin),
      "numa_status Node", 0, 65535);
  if (!parsed) return;
  long node = *parsed;
  a.memory_numa_nodes.push_back(static_cast<unsigned>(node));
  for (auto& n : model.numa_nodes) {
    if (n.os_index == static_cast<unsigned>(node) && n.cpus.empty()) n.kind = NumaKind::gpu_memory;
  }
}

// A sysfs attribute holding a hex number ("0x060400") within [0, max], else nullopt.
std::optional<std::uint32_t> read_hex_attribute(const fs::path& path, std::uint32_t max) {
  auto v = read_int_file(path);
  if (!v || *v < 0 || *v > static_cast<std::int64_t>(max)) return std::nullopt;
  return static_cast<std::uint32_t>(*v);
}

// sys/kernel/iommu_groups/N/devices/<bus id>, each member's class and IDs from its device
// directory; then every device of the model learns its group.
void read_iommu_groups(HostModel& model, const fs::path& root) {
  constexpr unsigned kMaxGroupId = 1u << 20;
  constexpr size_t kMaxMembers = 4096;
  std::error_code ec;
  fs::path groups_dir = root / "sys/kernel/iommu_groups";
  if (!fs::is_directory(groups_dir, ec)) return;
  std::vector<IommuGroup> groups;
  for (const auto& entry : fs::directory_iterator(groups_dir, ec)) {
    const std::string name = entry.path().filename().string();
    auto id = parse_integer<unsigned>(name, "IOMMU group", 0, kMaxGroupId);
    if (!id) continue;
    IommuGroup g;
    g.id = *id;
    std::error_code member_ec;
    for (const auto& m : fs::directory_iterator(entry.path() / "devices", member_ec)) {
      auto address = PciAddress::parse(m.path().filename().string());
      if (!address || g.members.size() >= kMaxMembers) continue;
      IommuGroupMember member;
      member.address = *address;
      // Its directory: the bus's link, else the group's own link when it stays under the root
      // (a gathered tree may lack the bridges in bus/pci/devices).
      fs::path dev = root / "sys/bus/pci/devices" / address->to_string();
      std::error_code link_ec;
      if (!fs::exists(dev, link_ec)) {
        fs::path target = fs::read_symlink(m.path(), link_ec);
        if (!link_ec && target.is_relative()) dev = m.path();
      }
      member.class_code = read_hex_attribute(dev / "class", 0xffffff).value_or(0);
      member.vendor_id =
          static_cast<std::uint16_t>(read_hex_attribute(dev / "vendor", 0xffff).value_or(0));
      member.device_id =
          static_cast<std::uint16_t>(read_hex_attribute(dev / "device", 0xffff).value_or(0));
      g.members.push_back(member);
    }
    std::sort(
        g.members.begin(), g.members.end(),
        [](const IommuGroupMember& a, const IommuGroupMember& b) { return a.address < b.address; });
    groups.push_back(std::move(g));
  }
  std::sort(groups.begin(), groups.end(),
            [](const IommuGroup& a, const IommuGroup& b) { return a.id < b.id; });
  model.iommu_groups = std::move(groups);
  auto assign = [&](PciDevice& d) {
    for (const auto& g : model.iommu_groups) {
      for (const auto& m : g.members) {
        if (m.address == d.address) d.iommu_group = g.id;
      }
    }
  };
  for (auto& a : model.accelerators)
    assign(a.pci);
  for (auto& n : model.nics)
    assign(n.pci);
  for (auto& n : model.nvme)
    assign(n.pci);
}

}  // namespace

void complete_from_sysfs(HostModel& model, const std::string& root_dir) {
  if (root_dir.empty()) return;
  fs::path root(root_dir);
  for (auto& n : model.numa_nodes)
    read_hugepages(n, root);
  for (auto& a : model.accelerators) {
    read_pci_link(a.pci, root);
    if (a.vendor == Vendor::nvidia) read_gpu_memory_node(a, model, root);
  }
  for (auto& n : model.nics)
    read_pci_link(n.pci, root);
  for (auto& n : model.nvme)
    read_pci_link(n.pci, root);
  complete_sriov(model, root);
  read_iommu_groups(model, root);
}

}  // namespace polyaccel::detail

namespace polyaccel {

void refresh_from_sysfs(HostModel& model, const std::string& root_dir) {
  if (root_dir.empty()) return;
  std::filesystem::path root(root_dir);
  for (auto& n : model.numa_nodes)
    detail::read_hugepages(n, root);
  for (auto& a : model.accelerators)
    detail::read_pci_link(a.pci, root);
  for (auto& n : model.nics)
    detail::read_pci_link(n.pci, root);
}

}  // namespace polyaccel
