// The device nodes of each accelerator, read once through a root (the live host's "/" or a
// captured tree): NVIDIA's minor number, the DRM card and render nodes, the accel minor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/host_model.h"

namespace polyaccel {

struct DeviceNodes {
  std::optional<unsigned> nvidia_minor;  // /dev/nvidia<N>, from /proc/driver/nvidia/gpus/<bdf>
  std::vector<std::string> drm;          // "card1", "renderD129": /dev/dri/<name>
  std::optional<unsigned> accel_minor;   // /dev/accel/accel<N> (Gaudi and other accel drivers)
};

// One entry per HostModel accelerator, in model order. What sysfs does not say is taken from
// hwloc's OS devices (DRM "card1"/"renderD129") when the model has them; the rest stays empty.
std::vector<DeviceNodes> read_device_nodes(const HostModel& model, const std::string& root);

// The character devices of one RDMA device (mlx5_0) under /dev/infiniband: uverbsN for verbs,
// umadN and issmN for MADs (a port each), found through sysfs's infiniband_verbs and
// infiniband_mad classes, whose ibdev file names the RDMA device.
struct RdmaNodes {
  std::string uverbs;             // "uverbs0"; empty when unknown
  std::vector<std::string> umad;  // "umad0", one per port
  std::vector<std::string> issm;  // "issm0"
};

// What the NIC resources need of sysfs beyond the HostModel.
struct NicNodes {
  std::map<std::string, RdmaNodes> rdma;       // by RDMA device name
  std::map<std::string, std::string> drivers;  // each NIC's bound driver, by PCI address
  // Each VF's own PCI vendor and device id (0x15b3, 0x101e), by PCI address.
  std::map<std::string, std::pair<std::uint16_t, std::uint16_t>> vf_ids;
};

NicNodes read_nic_nodes(const HostModel& model, const std::string& root);

}  // namespace polyaccel
