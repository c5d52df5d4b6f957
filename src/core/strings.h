// Small string helpers shared by every module.
#pragma once

#include <string>
#include <vector>

namespace polyaccel {

inline std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += separator;
    out += p;
  }
  return out;
}

}  // namespace polyaccel
