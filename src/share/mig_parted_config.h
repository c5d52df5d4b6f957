// NVIDIA mig-parted's configuration file, accepted as it is (api/spec/v1/spec.go): `version: v1`,
// `mig-configs` (name → entries), each entry with `devices` (all or indices), `mig-enabled`,
// `mig-devices` (profile → count) and an optional `device-filter` (PCI ids 0x<device><vendor>).
// Unknown keys are errors, as in mig-parted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "share/mig_planner.h"

namespace polyaccel {

struct MigPartedEntry {
  bool all_devices = false;
  std::vector<unsigned> devices;
  std::vector<std::uint32_t> device_filter;  // empty: every GPU model
  bool mig_enabled = false;
  MigRequest mig_devices;  // in file order
};

struct MigPartedConfig {
  std::string source;  // the file, for messages
  std::map<std::string, std::vector<MigPartedEntry>> configs;
};

Result<MigPartedConfig> parse_mig_parted_config(const std::string& text, const std::string& source);
Result<MigPartedConfig> read_mig_parted_config(const std::filesystem::path& path);

// The GPU a selection looks at.
struct MigPartedGpu {
  unsigned index = 0;
  std::uint32_t pci_id = 0;
};

// For each GPU, the target config `name` gives it, or nullopt when no entry of it applies (the
// GPU is left alone). Error (bad input) for an unknown config name.
Result<std::vector<std::optional<MigGpuTarget>>> select_mig_parted_config(
    const MigPartedConfig& config, const std::string& name, const std::vector<MigPartedGpu>& gpus);

}  // namespace polyaccel
