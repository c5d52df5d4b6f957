// MIG profile tables per GPU model (A100 40/80 GB, H100 80 GB, H100 NVL, H200, B200), compiled
// into the binary (mig_profiles_data.cc), and how a GPU is matched to one.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/mig_geometry.h"

namespace polyaccel {

const std::vector<MigGeometry>& builtin_mig_geometries();

// By table key, alias or NVML name, ignoring case and blanks: "H200", "h200-sxm5-141gb",
// "NVIDIA H100 80GB HBM3". Null when no table has it.
const MigGeometry* find_mig_geometry(std::string_view name);
// By PCI id 0x<device><vendor> (0x233010DE).
const MigGeometry* find_mig_geometry(std::uint32_t pci_id);

// The geometry a GPU is planned with: our table by PCI id or name, else what the library lists
// (its own profiles, for a model the tables do not know); null when neither.
const MigGeometry* mig_geometry_for(const MigGpu& gpu);

// The names --model accepts, for error messages: "A100-40GB, A100-80GB, ...".
std::string mig_model_names();

}  // namespace polyaccel
