// Vendor and device names from the pci.ids database (Debian package pci.ids), looked up by id.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace polyaccel {

struct PciNames {
  std::map<std::uint16_t, std::string> vendors;
  std::map<std::pair<std::uint16_t, std::uint16_t>, std::string> devices;
};

// Reads only the names of the wanted vendor:device pairs (one pass over the file). Empty maps
// when no pci.ids is found: names are a convenience, never required.
PciNames load_pci_names(const std::set<std::pair<std::uint16_t, std::uint16_t>>& wanted,
                        const std::string& path = {});

}  // namespace polyaccel
