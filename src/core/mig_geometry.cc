#include "core/mig_geometry.h"

namespace polyaccel {

const MigProfile* MigGeometry::profile(std::string_view wanted) const {
  for (const auto& p : profiles) {
    if (p.name == wanted) return &p;
  }
  // mig-parted writes "1g.10gb.me" in config names for "1g.10gb+me".
  constexpr std::string_view kMe = ".me";
  if (wanted.size() > kMe.size() && wanted.substr(wanted.size() - kMe.size()) == kMe) {
    std::string plus = std::string(wanted.substr(0, wanted.size() - kMe.size())) + "+me";
    for (const auto& p : profiles) {
      if (p.name == plus) return &p;
    }
  }
  return nullptr;
}

const MigProfile* MigGeometry::profile_by_id(unsigned id) const {
  for (const auto& p : profiles) {
    if (p.profile_id == id) return &p;
  }
  return nullptr;
}

}  // namespace polyaccel
