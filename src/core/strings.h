// Small string helpers shared by every module.
#pragma once

#include <optional>
#include <string>
#include <string_view>
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

// Text for an XML attribute or element (libvirt domains, NCCL topology files).
inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A small non-negative decimal count as people type it ("8"); nullopt for anything else (signs,
// blanks, hex, more than six digits).
inline std::optional<unsigned> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 6) return std::nullopt;
  unsigned n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  return n;
}

}  // namespace polyaccel
