#include "kube/device_nodes.h"

#include <filesystem>
#include <sstream>

#include "core/file_io.h"
#include "core/number.h"

namespace polyaccel {

namespace {

namespace fs = std::filesystem;

std::optional<unsigned> number_after(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return std::nullopt;
  std::string digits = name.substr(prefix.size());
  auto n = parse_integer<unsigned>(digits, name);  // "nvidia99999999999" is no device of ours
  if (!n) return std::nullopt;
  return *n;
}

// "Device Minor: 3" in NVIDIA's per-GPU procfs file.
std::optional<unsigned> nvidia_minor(const fs::path& information) {
  auto text = read_text_file(information);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Device Minor:", 0) != 0) continue;
    std::string value = line.substr(13);
    value.erase(0, value.find_first_not_of(" \t"));
    return number_after(value, "");
  }
  return std::nullopt;
}

}  // namespace

std::vector<DeviceNodes> read_device_nodes(const HostModel& model, const std::string& root) {
  std::vector<DeviceNodes> out;
  for (const auto& a : model.accelerators) {
    DeviceNodes n;
    const std::string bdf = a.pci.address.to_string();
    if (!root.empty()) {
      const fs::path pci = fs::path(root) / "sys/bus/pci/devices" / bdf;
      n.nvidia_minor =
          nvidia_minor(fs::path(root) / "proc/driver/nvidia/gpus" / bdf / "information");
      for (const auto& name : sorted_entry_names(pci / "drm")) {
        if (number_after(name, "card") || number_after(name, "renderD")) n.drm.push_back(name);
      }
      for (const auto& name : sorted_entry_names(pci / "accel")) {
        if (auto m = number_after(name, "accel")) n.accel_minor = m;
      }
    }
    // Without the driver's procfs file (a --topology capture, a root without /proc/driver), the
    // minor NVML gives, as NVIDIA's device plugin takes it.
    if (!n.nvidia_minor && a.inventory && a.inventory->device_minor)
      n.nvidia_minor = a.inventory->device_minor;
    if (n.drm.empty()) {
      for (const auto& os : a.pci.os_devices) {
        if (number_after(os.name, "card") || number_after(os.name, "renderD"))
          n.drm.push_back(os.name);
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

NicNodes read_nic_nodes(const HostModel& model, const std::string& root) {
  NicNodes out;
  if (root.empty()) return out;
  const fs::path sys = fs::path(root) / "sys/class";
  auto by_ibdev = [&](const std::string& cls, const std::string& prefix) {
    std::vector<std::pair<std::string, std::string>> found;  // (ibdev, node)
    for (const auto& name : sorted_entry_names(sys / cls)) {
      if (!number_after(name, prefix)) continue;
      auto ibdev = read_first_line(sys / cls / name / "ibdev");
      if (ibdev && !ibdev->empty()) found.emplace_back(*ibdev, name);
    }
    return found;
  };
  for (const auto& [dev, node] : by_ibdev("infiniband_verbs", "uverbs"))
    out.rdma[dev].uverbs = node;
  for (const auto& [dev, node] : by_ibdev("infiniband_mad", "umad"))
    out.rdma[dev].umad.push_back(node);
  for (const auto& [dev, node] : by_ibdev("infiniband_mad", "issm"))
    out.rdma[dev].issm.push_back(node);
  for (const auto& nic : model.nics) {
    const std::string bdf = nic.pci.address.to_string();
    std::error_code ec;
    fs::path target = fs::read_symlink(fs::path(root) / "sys/bus/pci/devices" / bdf / "driver", ec);
    if (!ec) out.drivers[bdf] = target.filename().string();
    if (!nic.pci.sriov) continue;
    for (const auto& vf : nic.pci.sriov->vfs) {
      const fs::path dir = fs::path(root) / "sys/bus/pci/devices" / vf.address.to_string();
      auto vendor = read_int_file(dir / "vendor");
      auto device = read_int_file(dir / "device");
      // PCI ids are 16 bits: anything else in the file is not believed.
      if (vendor && device && *vendor > 0 && *vendor <= 0xffff && *device > 0 && *device <= 0xffff)
        out.vf_ids[vf.address.to_string()] = {static_cast<std::uint16_t>(*vendor),
                                              static_cast<std::uint16_t>(*device)};
    }
  }
  return out;
}

}  // namespace polyaccel
