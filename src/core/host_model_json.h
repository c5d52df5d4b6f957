// The HostModel as JSON: the schema of `polyaccel topo --json` (docs/topology-json.md).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "core/host_model.h"

namespace polyaccel {

nlohmann::json to_json(const PciDevice& pci);
nlohmann::json to_json(const Sriov& sriov);
nlohmann::json to_json(const AcceleratorInventory& inventory);
nlohmann::json to_json(const HostModel& model);

}  // namespace polyaccel
