#include "core/host_model.h"

#include "core/number.h"

namespace polyaccel {

std::optional<std::pair<unsigned, unsigned>> compute_capability_numbers(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto major = parse_integer<unsigned>(text.substr(0, dot), "compute capability", 0, 99);
  auto minor = parse_integer<unsigned>(text.substr(dot + 1), "compute capability", 0, 99);
  if (!major || !minor) return std::nullopt;
  return std::pair{*major, *minor};
}

const char* to_string(NumaKind kind) {
  switch (kind) {
    case NumaKind::dram:
      return "dram";
    case NumaKind::hbm:
      return "hbm";
    case NumaKind::gpu_memory:
      return "gpu_memory";
    case NumaKind::cpuless:
      return "cpuless";
    case NumaKind::cxl:
      return "cxl";
  }
  return "unknown";
}

const char* to_string(Vendor vendor) {
  switch (vendor) {
    case Vendor::nvidia:
      return "nvidia";
    case Vendor::amd:
      return "amd";
    case Vendor::intel_gaudi:
      return "intel-gaudi";
    case Vendor::other:
      return "other";
  }
  return "other";
}

const char* to_string(LinkLevel level) {
  switch (level) {
    case LinkLevel::self:
      return "X";
    case LinkLevel::nvlink:
      return "NV";
    case LinkLevel::xgmi:
      return "XGMI";
    case LinkLevel::pix:
      return "PIX";
    case LinkLevel::pxb:
      return "PXB";
    case LinkLevel::phb:
      return "PHB";
    case LinkLevel::node:
      return "NODE";
    case LinkLevel::sys:
      return "SYS";
  }
  return "SYS";
}

std::string Link::label() const {
  if (level == LinkLevel::nvlink) return "NV" + std::to_string(count);
  return to_string(level);
}

bool Nic::rdma_capable() const {
  return !rdma_devices.empty() || fabric == "slingshot" || fabric == "infiniband" ||
         fabric == "omnipath" || fabric == "efa";
}

std::optional<size_t> LinkMatrix::index_of(const std::string& id) const {
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == id) return i;
  }
  return std::nullopt;
}

const NumaNode* HostModel::numa_node(unsigned os_index) const {
  for (const auto& n : numa_nodes) {
    if (n.os_index == os_index) return &n;
  }
  return nullptr;
}

const Accelerator* HostModel::accelerator(const std::string& key) const {
  auto addr = PciAddress::parse(key);
  for (const auto& a : accelerators) {
    if (a.id == key || (addr && a.pci.address == *addr)) return &a;
  }
  return nullptr;
}

const Nic* HostModel::nic(const std::string& key) const {
  for (const auto& n : nics) {
    if (n.id == key || n.pci.address.to_string() == key) return &n;
    for (const auto& d : n.netdevs)
      if (d == key) return &n;
    for (const auto& d : n.rdma_devices)
      if (d == key) return &n;
  }
  return nullptr;
}

const IommuGroup* HostModel::iommu_group(unsigned id) const {
  for (const auto& g : iommu_groups) {
    if (g.id == id) return &g;
  }
  return nullptr;
}

bool IommuGroupMember::is_bridge() const {
  const unsigned class_and_subclass = class_code >> 8;
  return class_and_subclass == 0x0600 || class_and_subclass == 0x0604;
}

std::vector<const Accelerator*> HostModel::accelerators_of(Vendor vendor) const {
  std::vector<const Accelerator*> out;
  for (const auto& a : accelerators) {
    if (a.vendor == vendor) out.push_back(&a);
  }
  return out;
}

std::vector<unsigned> HostModel::numa_nodes_of(const CpuSet& cpus) const {
  std::vector<unsigned> out;
  for (const auto& n : numa_nodes) {
    if (n.cpus.intersects(cpus)) out.push_back(n.os_index);
  }
  return out;
}

}  // namespace polyaccel
