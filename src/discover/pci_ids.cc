#include "discover/pci_ids.h"

#include <charconv>
#include <optional>
#include <sstream>

#include "core/file_io.h"

namespace polyaccel {

namespace {

// pci.ids is 1.4 MiB (2024); past this it is not one.
constexpr std::uint64_t kMaxPciIdsBytes = std::uint64_t{16} << 20;
bool parse_id(const std::string& line, size_t pos, std::uint16_t& out) {
  if (line.size() < pos + 4) return false;
  unsigned v = 0;
  auto [p, ec] = std::from_chars(line.data() + pos, line.data() + pos + 4, v, 16);
  if (ec != std::errc() || p != line.data() + pos + 4) return false;
  out = static_cast<std::uint16_t>(v);
  return true;
}

std::string name_after(const std::string& line, size_t pos) {
  size_t b = line.find_first_not_of(" \t", pos);
  return b == std::string::npos ? std::string{} : line.substr(b);
}
}  // namespace

PciNames load_pci_names(const std::set<std::pair<std::uint16_t, std::uint16_t>>& wanted,
                        const std::string& path) {
  PciNames names;
  if (wanted.empty()) return names;
  std::set<std::uint16_t> vendors;
  for (const auto& w : wanted)
    vendors.insert(w.first);
  // Through the one reader of input files: a FIFO named as pci.ids would block a plain open.
  std::optional<std::string> text;
  for (const char* p : {"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"}) {
    auto t = read_input_file(path.empty() ? std::string(p) : path, kMaxPciIdsBytes, "pci.ids");
    if (t) text = std::move(*t);
    if (t || !path.empty()) break;
  }
  if (!text) return names;
  std::istringstream in(*text);
  std::string line;
  std::uint16_t vendor = 0;
  bool in_wanted_vendor = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // The class list at the end of the file starts with "C "; no device names after it.
    if (line[0] == 'C' && line.size() > 1 && line[1] == ' ') break;
    if (line[0] != '\t') {
      in_wanted_vendor = parse_id(line, 0, vendor) && vendors.count(vendor);
      if (in_wanted_vendor) names.vendors[vendor] = name_after(line, 4);
      continue;
    }
    if (!in_wanted_vendor || line.size() < 2 || line[1] == '\t') continue;  // subsystem lines
    std::uint16_t device = 0;
    if (parse_id(line, 1, device) && wanted.count({vendor, device})) {
      names.devices[{vendor, device}] = name_after(line, 5);
    }
  }
  return names;
}

}  // namespace polyaccel
