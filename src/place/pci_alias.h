// PCI aliases as Nova's [pci] alias option writes them: a name for a vendor (and product) that
// flavors request with pci_passthrough:alias=NAME:COUNT.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"

namespace polyaccel::place {

// hw:pci_numa_affinity_policy and the alias's numa_policy.
enum class PciNumaPolicy { legacy, required, preferred, socket };
const char* to_string(PciNumaPolicy policy);
std::optional<PciNumaPolicy> parse_pci_numa_policy(const std::string& text);

struct PciAlias {
  std::string name;
  std::uint16_t vendor_id = 0;
  std::optional<std::uint16_t> device_id;  // absent: any device of the vendor
  std::optional<PciNumaPolicy> numa_policy;

  bool matches(const PciDevice& device) const;
};

// "name=10de:2330", "name=10de:2330:required" or "name=15b3" (any Mellanox device).
Result<PciAlias> parse_pci_alias_option(const std::string& text);

// A file of aliases in Nova's own format: one JSON object per alias
// ({"name": "a100", "vendor_id": "10de", "product_id": "20b0", "numa_policy": "required"}),
// as a JSON array or as nova.conf lines `alias = {...}`; '#' starts a comment line.
Result<std::vector<PciAlias>> parse_pci_alias_file(const std::string& path,
                                                   const std::string& text);

}  // namespace polyaccel::place
