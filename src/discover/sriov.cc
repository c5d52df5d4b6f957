#include "discover/sriov.h"

#include <algorithm>

#include "core/file_io.h"
#include "core/number.h"
#include "discover/hwloc_source.h"

namespace polyaccel {

namespace fs = std::filesystem;

fs::path pci_device_dir(const fs::path& root, const PciAddress& address) {
  return root / "sys/bus/pci/devices" / address.to_string();
}

namespace {

// The PCI address a sysfs link such as virtfn3 → ../0000:60:02.3 points to.
std::optional<PciAddress> link_target_address(const fs::path& link) {
  std::error_code ec;
  fs::path target = fs::read_symlink(link, ec);
  if (ec) return std::nullopt;
  return PciAddress::parse(target.filename().string());
}

std::string link_target_name(const fs::path& link) {
  std::error_code ec;
  fs::path target = fs::read_symlink(link, ec);
  return ec ? std::string() : target.filename().string();
}

// "virtfn12" → 12; nullopt for any other name.
std::optional<unsigned> virtfn_index(const std::string& name) {
  if (name.rfind("virtfn", 0) != 0 || name.size() == 6) return std::nullopt;
  unsigned n = 0;
  for (size_t i = 6; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    n = n * 10 + static_cast<unsigned>(name[i] - '0');
  }
  return n;
}

// A sysfs count as the kernel writes it: decimal, within [0, max]. Absent (or unreadable) is
// nullopt; anything else, such as 4294967304 (which a 32-bit read would take for 8), is an error
// naming the file: never wrapped.
Result<std::optional<unsigned>> read_count(const fs::path& file, unsigned max) {
  auto line = read_first_line(file);
  if (!line) return std::optional<unsigned>();
  auto v = parse_integer<unsigned>(*line, file.string(), 0, max);
  if (!v) return v.error();
  return std::optional<unsigned>(*v);
}

void complete_device(PciDevice& d, const fs::path& root) {
  // A value the kernel never writes drops the function's SR-IOV facts, as an absent
  // sriov_totalvfs does: none rather than a wrapped count (`sriov set` names the file).
  auto sriov = read_sriov_facts(root, d.address);
  d.sriov = sriov ? *sriov : std::nullopt;
  d.physical_function = read_physical_function(root, d.address);
}

}  // namespace

Result<std::optional<Sriov>> read_sriov_facts(const fs::path& root, const PciAddress& address) {
  const fs::path dir = pci_device_dir(root, address);
  // PCIe's TotalVFs and NumVFs are 16-bit registers, and the kernel never enables more VFs than
  // the function supports.
  auto total = read_count(dir / "sriov_totalvfs", 0xffff);
  if (!total) return total.error();
  if (!*total) return std::optional<Sriov>();
  Sriov s;
  s.total_vfs = **total;
  auto num = read_count(dir / "sriov_numvfs", s.total_vfs);
  if (!num) return num.error();
  s.num_vfs = num->value_or(0);
  for (const auto& name : sorted_entry_names(dir)) {
    auto index = virtfn_index(name);
    if (!index) continue;
    auto vf_address = link_target_address(dir / name);
    if (!vf_address) continue;
    // Read through the link itself: it resolves to the VF's real directory on the live host and
    // in a gathered tree alike.
    const fs::path vf_dir = dir / name;
    VirtualFunction vf;
    vf.index = *index;
    vf.address = *vf_address;
    // A node number, or -1 for none; anything else is no locality either, never wrapped.
    if (auto node = read_first_line(vf_dir / "numa_node")) {
      if (auto n = parse_integer<unsigned>(*node, "numa_node", 0, detail::kMaxNodeIndex))
        vf.numa_node = *n;
    }
    vf.netdevs = sorted_entry_names(vf_dir / "net");
    vf.rdma_devices = sorted_entry_names(vf_dir / "infiniband");
    vf.driver = link_target_name(vf_dir / "driver");
    s.vfs.push_back(std::move(vf));
  }
  std::sort(s.vfs.begin(), s.vfs.end(),
            [](const VirtualFunction& a, const VirtualFunction& b) { return a.index < b.index; });
  return std::optional<Sriov>(std::move(s));
}

std::optional<Sriov> read_sriov(const fs::path& root, const PciAddress& address) {
  auto s = read_sriov_facts(root, address);
  return s ? *s : std::nullopt;
}

Result<unsigned> read_sriov_num_vfs(const fs::path& root, const PciAddress& address,
                                    unsigned total_vfs) {
  auto n = read_count(pci_device_dir(root, address) / "sriov_numvfs", total_vfs);
  if (!n) return n.error();
  return n->value_or(0);
}

std::optional<PciAddress> read_physical_function(const fs::path& root, const PciAddress& address) {
  return link_target_address(pci_device_dir(root, address) / "physfn");
}

void complete_sriov(HostModel& model, const fs::path& root) {
  for (auto& a : model.accelerators)
    complete_device(a.pci, root);
  for (auto& n : model.nics)
    complete_device(n.pci, root);
  for (auto& n : model.nvme)
    complete_device(n.pci, root);
}

}  // namespace polyaccel
