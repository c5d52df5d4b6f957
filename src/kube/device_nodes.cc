#include "kube/device_nodes.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/file_io.h"

namespace polyaccel {

namespace {

namespace fs = std::filesystem;

std::optional<unsigned> number_after(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return std::nullopt;
  std::string digits = name.substr(prefix.size());
  // Device numbers are small: more digits than an unsigned holds is no device number (and would
  // make std::stoul throw, or the cast wrap).
  if (digits.size() > 9) return std::nullopt;
  if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  return static_cast<unsigned>(std::stoul(digits));
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

std::vector<std::string> sorted_entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
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
      for (const auto& name : sorted_entries(pci / "drm")) {
        if (number_after(name, "card") || number_after(name, "renderD")) n.drm.push_back(name);
      }
      for (const auto& name : sorted_entries(pci / "accel")) {
        if (auto m = number_after(name, "accel")) n.accel_minor = m;
      }
    }
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

}  // namespace polyaccel
