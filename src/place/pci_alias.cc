#include "place/pci_alias.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <sstream>

namespace polyaccel::place {

const char* to_string(PciNumaPolicy policy) {
  switch (policy) {
    case PciNumaPolicy::legacy:
      return "legacy";
    case PciNumaPolicy::required:
      return "required";
    case PciNumaPolicy::preferred:
      return "preferred";
    case PciNumaPolicy::socket:
      return "socket";
  }
  return "legacy";
}

std::optional<PciNumaPolicy> parse_pci_numa_policy(const std::string& text) {
  for (auto p : {PciNumaPolicy::legacy, PciNumaPolicy::required, PciNumaPolicy::preferred,
                 PciNumaPolicy::socket}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

bool PciAlias::matches(const PciDevice& device) const {
  return device.vendor_id == vendor_id && (!device_id || device.device_id == *device_id);
}

namespace {

std::optional<std::uint16_t> parse_hex16(const std::string& text) {
  std::string t = text.rfind("0x", 0) == 0 ? text.substr(2) : text;
  if (t.empty() || t.size() > 4) return std::nullopt;
  unsigned v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 16);
  if (ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

bool valid_alias_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  }
  return true;
}

Result<PciAlias> alias_from_json(const std::string& input, const nlohmann::json& j) {
  if (!j.is_object()) return bad_input(input, "a PCI alias must be a JSON object");
  PciAlias a;
  auto str = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
  };
  a.name = str("name");
  if (!valid_alias_name(a.name))
    return bad_input(input, "PCI alias needs a \"name\" of letters, digits, '-', '_' or '.'");
  auto vendor = parse_hex16(str("vendor_id"));
  if (!vendor)
    return bad_input(input, "PCI alias '" + a.name + "' needs \"vendor_id\" as 4 hex digits");
  a.vendor_id = *vendor;
  if (j.contains("product_id")) {
    auto device = parse_hex16(str("product_id"));
    if (!device)
      return bad_input(input, "PCI alias '" + a.name + "': \"product_id\" is not 4 hex digits");
    a.device_id = *device;
  }
  if (j.contains("numa_policy")) {
    auto p = parse_pci_numa_policy(str("numa_policy"));
    if (!p)
      return bad_input(input, "PCI alias '" + a.name + "': numa_policy '" + str("numa_policy") +
                                  "' is not one of: legacy, required, preferred, socket");
    a.numa_policy = *p;
  }
  return a;
}

}  // namespace

Result<PciAlias> parse_pci_alias_option(const std::string& text) {
  const std::string input = "--pci-alias " + text;
  auto eq = text.find('=');
  if (eq == std::string::npos)
    return bad_input(input, "expected NAME=VENDOR[:DEVICE[:POLICY]]", "e.g. a100=10de:20b0");
  PciAlias a;
  a.name = text.substr(0, eq);
  if (!valid_alias_name(a.name)) return bad_input(input, "the alias name is empty or not a word");
  std::vector<std::string> parts;
  std::stringstream ss(text.substr(eq + 1));
  for (std::string p; std::getline(ss, p, ':');)
    parts.push_back(p);
  if (parts.empty() || parts.size() > 3)
    return bad_input(input, "expected NAME=VENDOR[:DEVICE[:POLICY]]", "e.g. a100=10de:20b0");
  auto vendor = parse_hex16(parts[0]);
  if (!vendor) return bad_input(input, "vendor '" + parts[0] + "' is not 4 hex digits");
  a.vendor_id = *vendor;
  if (parts.size() >= 2 && parts[1] != "*") {
    auto device = parse_hex16(parts[1]);
    if (!device) return bad_input(input, "device '" + parts[1] + "' is not 4 hex digits");
    a.device_id = *device;
  }
  if (parts.size() == 3) {
    auto p = parse_pci_numa_policy(parts[2]);
    if (!p)
      return bad_input(
          input, "policy '" + parts[2] + "' is not one of: legacy, required, preferred, socket");
    a.numa_policy = *p;
  }
  return a;
}

Result<std::vector<PciAlias>> parse_pci_alias_file(const std::string& path,
                                                   const std::string& text) {
  std::vector<PciAlias> out;
  auto add = [&](const std::string& input, const nlohmann::json& j) -> Status {
    auto a = alias_from_json(input, j);
    if (!a) return a.error();
    for (const auto& existing : out) {
      if (existing.name == a->name)
        return bad_input(input, "PCI alias '" + a->name + "' is defined twice");
    }
    out.push_back(std::move(*a));
    return Ok{};
  };
  size_t first = text.find_first_not_of(" \t\r\n");
  size_t second = first == std::string::npos ? first : text.find_first_not_of(" \t\r\n", first + 1);
  if (first != std::string::npos && text[first] == '[' && second != std::string::npos &&
      (text[second] == '{' || text[second] == ']')) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_array()) return bad_input(path, "not a JSON array of aliases");
    for (const auto& item : j) {
      if (auto s = add(path, item); !s) return s.error();
    }
    return out;
  }
  std::stringstream ss(text);
  unsigned line_no = 0;
  for (std::string line; std::getline(ss, line);) {
    ++line_no;
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#' || line[b] == ';' || line[b] == '[') continue;
    std::string body = line.substr(b);
    if (body.rfind("alias", 0) == 0) {
      auto eq = body.find('=');
      if (eq == std::string::npos) continue;
      body = body.substr(eq + 1);
    } else if (body[0] != '{') {
      continue;  // another nova.conf option
    }
    const std::string input = path + ":" + std::to_string(line_no);
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded()) return bad_input(input, "the alias is not a JSON object");
    if (auto s = add(input, j); !s) return s.error();
  }
  if (out.empty()) return bad_input(path, "no PCI alias found", "one JSON object per alias");
  return out;
}

}  // namespace polyaccel::place
