#include "share/mig_profiles.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/strings.h"

namespace polyaccel {

namespace {

// Lower case without blanks, dashes or underscores: "NVIDIA H100 NVL" and "nvidia-h100-nvl" match.
std::string name_key(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '-' || c == '_') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

const MigGeometry* find_mig_geometry(std::string_view name) {
  std::string key = name_key(name);
  if (key.empty()) return nullptr;
  for (const auto& g : builtin_mig_geometries()) {
    if (name_key(g.model) == key) return &g;
    for (const auto& a : g.aliases) {
      if (name_key(a) == key) return &g;
    }
  }
  return nullptr;
}

const MigGeometry* find_mig_geometry(std::uint32_t pci_id) {
  for (const auto& g : builtin_mig_geometries()) {
    if (std::find(g.pci_ids.begin(), g.pci_ids.end(), pci_id) != g.pci_ids.end()) return &g;
  }
  return nullptr;
}

const MigGeometry* mig_geometry_for(const MigGpu& gpu) {
  if (const MigGeometry* g = find_mig_geometry(gpu.pci_id)) return g;
  if (const MigGeometry* g = find_mig_geometry(gpu.name)) return g;
  return gpu.library_geometry ? &*gpu.library_geometry : nullptr;
}

std::string mig_model_names() {
  std::vector<std::string> names;
  for (const auto& g : builtin_mig_geometries())
    names.push_back(g.aliases.empty() ? g.model : g.aliases.front());
  return join(names, ", ");
}

}  // namespace polyaccel
