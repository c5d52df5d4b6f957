// The device nodes of each accelerator, read once through a root (the live host's "/" or a
// captured tree): NVIDIA's minor number, the DRM card and render nodes, the accel minor.
#pragma once

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

}  // namespace polyaccel
