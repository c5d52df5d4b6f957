#include "discover/sriov.h"

#include <algorithm>

#include "core/file_io.h"

namespace polyaccel {

namespace fs = std::filesystem;

fs::path pci_device_dir(const fs::path& root, const PciAddress& address) {
  return root / "sys/bus/pci/devices" / address.to_string();
}

std::vector<std::string> sysfs_children(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
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

void complete_device(PciDevice& d, const fs::path& root) {
  d.sriov = read_sriov(root, d.address);
  d.physical_function = read_physical_function(root, d.address);
}

}  // namespace

std::optional<Sriov> read_sriov(const fs::path& root, const PciAddress& address) {
  const fs::path dir = pci_device_dir(root, address);
  auto total = read_int_file(dir / "sriov_totalvfs");
  if (!total || *total < 0) return std::nullopt;
  Sriov s;
  s.total_vfs = static_cast<unsigned>(*total);
  if (auto n = read_int_file(dir / "sriov_numvfs"); n && *n >= 0)
    s.num_vfs = static_cast<unsigned>(*n);
  for (const auto& name : sysfs_children(dir)) {
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
    if (auto node = read_int_file(vf_dir / "numa_node"); node && *node >= 0) {
      vf.numa_node = static_cast<unsigned>(*node);
    }
    vf.netdevs = sysfs_children(vf_dir / "net");
    vf.rdma_devices = sysfs_children(vf_dir / "infiniband");
    vf.driver = link_target_name(vf_dir / "driver");
    s.vfs.push_back(std::move(vf));
  }
  std::sort(s.vfs.begin(), s.vfs.end(),
            [](const VirtualFunction& a, const VirtualFunction& b) { return a.index < b.index; });
  return s;
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
