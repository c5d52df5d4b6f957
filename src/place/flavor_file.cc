#include "place/flavor_file.h"

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "core/byte_size.h"
#include "core/json.h"
#include "core/number.h"
#include "core/strings.h"

namespace polyaccel::place {

Result<std::vector<std::pair<std::string, std::string>>> parse_properties_string(
    const std::string& input, const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  auto skip_blanks = [&] {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == ',' || text[pos] == '\n'))
      ++pos;
  };
  skip_blanks();
  while (pos < text.size()) {
    size_t eq = text.find('=', pos);
    if (eq == std::string::npos)
      return bad_input(input, "properties: expected key='value' at '" + text.substr(pos) + "'");
    std::string key = text.substr(pos, eq - pos);
    pos = eq + 1;
    std::string value;
    if (pos < text.size() && (text[pos] == '\'' || text[pos] == '"')) {
      char quote = text[pos];
      size_t end = text.find(quote, pos + 1);
      if (end == std::string::npos)
        return bad_input(input, "properties: unterminated quote in the value of " + key);
      value = text.substr(pos + 1, end - pos - 1);
      pos = end + 1;
    } else {
      size_t end = text.find(", ", pos);
      if (end == std::string::npos) end = text.size();
      value = text.substr(pos, end - pos);
      pos = end;
    }
    out.emplace_back(key, value);
    skip_blanks();
  }
  return out;
}

namespace {

// RAM in MiB that still fits in bytes, and vCPUs as Nova stores them (a 32-bit column).
constexpr std::uint64_t kMaxRamMiB = (std::uint64_t{1} << 44) - 1;
constexpr unsigned kMaxVcpus = std::numeric_limits<std::int32_t>::max();

// "FILE: vcpus '4294967297' is out of range (1..2147483647)": the file, then the field.
Error field_error(const std::string& path, const Error& e) {
  return bad_input(path, e.input + " " + e.problem);
}

Result<FlavorFile> flavor_file_from_json(const std::string& path, const nlohmann::json& j) {
  FlavorFile f;
  if (!j.is_object()) return bad_input(path, "a flavor must be a JSON object");
  if (j.contains("name") && j["name"].is_string()) f.name = j["name"].get<std::string>();
  auto vcpus = j.find("vcpus");
  if (vcpus == j.end()) return bad_input(path, "\"vcpus\" is missing");
  auto n = json_integer<unsigned>(*vcpus, "vcpus", 1, kMaxVcpus);
  if (!n) return field_error(path, n.error());
  f.request.vcpus = *n;
  auto ram = j.find("ram");
  if (ram == j.end()) return bad_input(path, "\"ram\" (the flavor's memory in MiB) is missing");
  auto mib = json_integer<std::uint64_t>(*ram, "ram", 1, kMaxRamMiB);
  if (!mib) return field_error(path, mib.error());
  f.request.memory_bytes = *mib << 20;
  // openstack flavor show names them "properties"; the compute API names them "extra_specs".
  for (const char* key : {"properties", "extra_specs", "os-flavor-access:extra_specs"}) {
    auto p = j.find(key);
    if (p == j.end() || p->is_null()) continue;
    if (p->is_string()) {
      auto parsed = parse_properties_string(path, p->get<std::string>());
      if (!parsed) return parsed.error();
      f.request.extra_specs = std::move(*parsed);
    } else if (p->is_object()) {
      for (const auto& [k, v] : p->items()) {
        if (!v.is_string()) return bad_input(path, "property " + k + " is not a string");
        f.request.extra_specs.emplace_back(k, v.get<std::string>());
      }
    } else {
      return bad_input(path, std::string("\"") + key + "\" must be a dict or a string");
    }
  }
  return f;
}

Result<FlavorFile> from_yaml(const std::string& path, const YAML::Node& y) {
  FlavorFile f;
  if (!y.IsMap()) return bad_input(path, "a flavor must be a YAML mapping");
  if (y["name"]) f.name = y["name"].as<std::string>();
  if (!y["vcpus"]) return bad_input(path, "vcpus is missing");
  auto n = parse_integer<unsigned>(y["vcpus"].IsScalar() ? y["vcpus"].Scalar() : "", "vcpus", 1,
                                   kMaxVcpus);
  if (!n) return field_error(path, n.error());
  f.request.vcpus = *n;
  if (y["memory"]) {
    auto bytes = parse_byte_size(y["memory"].as<std::string>());
    if (!bytes)
      return bad_input(path,
                       "memory " + quote_input(y["memory"].as<std::string>()) + " is not a size");
    f.request.memory_bytes = *bytes;
  } else if (y["ram"]) {
    auto mib = parse_integer<std::uint64_t>(y["ram"].IsScalar() ? y["ram"].Scalar() : "", "ram", 1,
                                            kMaxRamMiB);
    if (!mib) return field_error(path, mib.error());
    f.request.memory_bytes = *mib << 20;
  } else {
    return bad_input(path, "memory (e.g. 64GiB) or ram (MiB) is missing");
  }
  for (const char* key : {"extra_specs", "properties"}) {
    if (!y[key]) continue;
    if (!y[key].IsMap()) return bad_input(path, std::string(key) + " must be a mapping");
    for (const auto& kv : y[key])
      f.request.extra_specs.emplace_back(kv.first.as<std::string>(), kv.second.as<std::string>());
  }
  if (y["pci_aliases"]) {
    if (!y["pci_aliases"].IsMap()) return bad_input(path, "pci_aliases must be a mapping");
    for (const auto& kv : y["pci_aliases"]) {
      auto a =
          parse_pci_alias_option(kv.first.as<std::string>() + "=" + kv.second.as<std::string>());
      if (!a) return bad_input(path, a.error().problem);
      f.aliases.push_back(*a);
    }
  }
  return f;
}

}  // namespace

Result<FlavorFile> parse_flavor_file(const std::string& path, const std::string& text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return bad_input(path, "not valid JSON");
    return flavor_file_from_json(path, j);
  }
  try {
    return from_yaml(path, YAML::Load(text));
  } catch (const YAML::Exception& e) {
    return bad_input(path, std::string("not valid YAML: ") + e.what());
  }
}

}  // namespace polyaccel::place
