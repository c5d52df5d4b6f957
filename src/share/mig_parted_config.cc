#include "share/mig_parted_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "core/file_io.h"
#include "core/number.h"
#include "core/strings.h"

namespace polyaccel {

namespace {

// Past any node (MIG has at most 7 instances on a GPU): nothing larger is meant, and nothing
// derived from these can wrap.
constexpr unsigned kMaxGpuIndex = 1023;
constexpr int kMaxMigCount = 1024;

std::string where(const std::string& source, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return m.is_null() ? source : source + ":" + std::to_string(m.line + 1);
}

// A scalar's text, or an error that names the key and where it is: yaml-cpp's own as<>() says
// only "bad conversion".
Result<std::string> scalar(const YAML::Node& node, const std::string& key,
                           const std::string& source) {
  if (!node.IsScalar())
    return bad_input(where(source, node), key + " must be a single value, not a list or mapping");
  return node.Scalar();
}

Result<std::uint32_t> parse_pci_id(const std::string& text, const std::string& at) {
  std::string s = text;
  if (s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0) s = s.substr(2);
  if (s.size() != 8 || !std::all_of(s.begin(), s.end(), ::isxdigit)) {
    return bad_input(at, "device-filter " + text + " is not a PCI id 0x<device><vendor>",
                     "e.g. 0x20B010DE");
  }
  auto id = parse_hex(s, "device-filter", 0xFFFFFFFF);  // eight hex digits: always fits
  if (!id) return bad_input(at, id.error().message());
  return static_cast<std::uint32_t>(*id);
}

Result<MigPartedEntry> parse_entry(const YAML::Node& node, const std::string& source) {
  std::string at = where(source, node);
  if (!node.IsMap()) return bad_input(at, "a mig-configs entry must be a mapping");
  static const std::set<std::string> kKeys = {"devices", "mig-enabled", "mig-devices",
                                              "device-filter"};
  for (const auto& kv : node) {
    auto key_text = scalar(kv.first, "a key of a mig-configs entry", source);
    if (!key_text) return key_text.error();
    const std::string& key = *key_text;
    if (!kKeys.count(key)) {
      return bad_input(where(source, kv.first), "unknown key '" + key + "'",
                       "mig-parted v1 entries have devices, mig-enabled, mig-devices, "
                       "device-filter");
    }
  }
  MigPartedEntry e;
  const YAML::Node devices = node["devices"];
  if (!devices) return bad_input(at, "devices is required (all or a list of GPU indices)");
  if (devices.IsScalar() && devices.as<std::string>() == "all") {
    e.all_devices = true;
  } else if (devices.IsSequence()) {
    for (const auto& d : devices) {
      auto index =
          parse_integer<unsigned>(d.IsScalar() ? d.Scalar() : "", "GPU index", 0, kMaxGpuIndex);
      if (!index) return bad_input(where(source, d), "devices: " + index.error().message());
      e.devices.push_back(*index);
    }
  } else {
    return bad_input(where(source, devices), "devices must be 'all' or a list of GPU indices");
  }
  const YAML::Node enabled = node["mig-enabled"];
  if (!enabled) return bad_input(at, "mig-enabled is required");
  auto enabled_text = scalar(enabled, "mig-enabled", source);
  if (!enabled_text) return enabled_text.error();
  // YAML's booleans as yaml-cpp reads them (true/false, yes/no, on/off), nothing else.
  if (!YAML::convert<bool>::decode(enabled, e.mig_enabled))
    return bad_input(where(source, enabled),
                     "mig-enabled: " + quote_input(*enabled_text) + " is not true or false");
  const YAML::Node mig_devices = node["mig-devices"];
  if (e.mig_enabled && !mig_devices) {
    return bad_input(at, "mig-devices is required when mig-enabled is true");
  }
  if (mig_devices && !mig_devices.IsNull()) {
    if (!mig_devices.IsMap())
      return bad_input(where(source, mig_devices),
                       "mig-devices must map "
                       "profile to count");
    for (const auto& kv : mig_devices) {
      auto profile = scalar(kv.first, "a mig-devices profile", source);
      if (!profile) return profile.error();
      auto count = parse_integer<int>(kv.second.IsScalar() ? kv.second.Scalar() : "",
                                      "mig-devices " + *profile, 0, kMaxMigCount);
      if (!count) return bad_input(where(source, kv.second), count.error().message());
      if (*count > 0) e.mig_devices.emplace_back(*profile, *count);
    }
  }
  if (!e.mig_enabled && !e.mig_devices.empty()) {
    return bad_input(at, "mig-devices must be empty when mig-enabled is false");
  }
  if (const YAML::Node filter = node["device-filter"]) {
    std::vector<std::string> ids;
    if (filter.IsSequence()) {
      for (const auto& f : filter) {
        auto id = scalar(f, "device-filter", source);
        if (!id) return id.error();
        ids.push_back(*id);
      }
    } else {
      auto id = scalar(filter, "device-filter", source);
      if (!id) return id.error();
      ids.push_back(*id);
    }
    for (const auto& id : ids) {
      auto v = parse_pci_id(id, where(source, filter));
      if (!v) return v.error();
      e.device_filter.push_back(*v);
    }
  }
  return e;
}

// A GPU both entries would configure, for the error ("GPU 1", "every GPU"), or nullopt: their
// devices overlap ('all' overlaps everything) and so do their device-filters (none: any model).
std::optional<std::string> shared_gpu(const MigPartedEntry& a, const MigPartedEntry& b) {
  bool models_overlap = a.device_filter.empty() || b.device_filter.empty() ||
                        std::any_of(a.device_filter.begin(), a.device_filter.end(), [&](auto id) {
                          return std::find(b.device_filter.begin(), b.device_filter.end(), id) !=
                                 b.device_filter.end();
                        });
  if (!models_overlap) return std::nullopt;
  if (a.all_devices && b.all_devices) return "every GPU";
  if (a.all_devices)
    return b.devices.empty()
               ? std::nullopt
               : std::optional<std::string>("GPU " + std::to_string(b.devices.front()));
  if (b.all_devices)
    return a.devices.empty()
               ? std::nullopt
               : std::optional<std::string>("GPU " + std::to_string(a.devices.front()));
  for (unsigned index : b.devices) {
    if (std::find(a.devices.begin(), a.devices.end(), index) != a.devices.end())
      return "GPU " + std::to_string(index);
  }
  return std::nullopt;
}

Result<MigPartedConfig> parse_document(const YAML::Node& doc, const std::string& source) {
  if (!doc.IsMap()) return bad_input(source, "not a mig-parted config (a YAML mapping)");
  for (const auto& kv : doc) {
    auto key_text = scalar(kv.first, "a top-level key", source);
    if (!key_text) return key_text.error();
    const std::string& key = *key_text;
    if (key != "version" && key != "mig-configs") {
      return bad_input(where(source, kv.first), "unknown key '" + key + "'",
                       "a mig-parted config has version and mig-configs");
    }
  }
  if (!doc["version"] || !doc["version"].IsScalar() || doc["version"].Scalar() != "v1") {
    return bad_input(source, "version must be v1 (mig-parted's config format)");
  }
  const YAML::Node configs = doc["mig-configs"];
  if (!configs || !configs.IsMap()) {
    return bad_input(source, "mig-configs is missing or not a mapping");
  }
  MigPartedConfig out;
  out.source = source;
  for (const auto& kv : configs) {
    auto name_text = scalar(kv.first, "a mig-configs name", source);
    if (!name_text) return name_text.error();
    const std::string& name = *name_text;
    if (!kv.second.IsSequence()) {
      return bad_input(where(source, kv.second), "config " + name + " must be a list of entries");
    }
    std::vector<MigPartedEntry> entries;
    std::vector<std::string> entry_lines;
    for (const auto& e : kv.second) {
      auto entry = parse_entry(e, source);
      if (!entry) return entry.error();
      // A GPU in two entries would get the first entry's layout and the second would be dropped
      // without a word ("0 changes"): which one was meant is for the file's author to say.
      for (size_t i = 0; i < entries.size(); ++i) {
        if (auto gpu = shared_gpu(entries[i], *entry)) {
          return bad_input(
              where(source, e),
              "config " + name + ": " + *gpu + " is also in the entry at " + entry_lines[i],
              "give each GPU in one entry of a config");
        }
      }
      entries.push_back(std::move(*entry));
      entry_lines.push_back(where(source, e));
    }
    out.configs.emplace(name, std::move(entries));
  }
  return out;
}

bool applies(const MigPartedEntry& e, const MigPartedGpu& gpu) {
  if (!e.device_filter.empty() && std::find(e.device_filter.begin(), e.device_filter.end(),
                                            gpu.pci_id) == e.device_filter.end()) {
    return false;
  }
  return e.all_devices ||
         std::find(e.devices.begin(), e.devices.end(), gpu.index) != e.devices.end();
}

}  // namespace

Result<MigPartedConfig> parse_mig_parted_config(const std::string& text,
                                                const std::string& source) {
  try {
    return parse_document(YAML::Load(text), source);
  } catch (const YAML::Exception& e) {
    return bad_input(e.mark.is_null() ? source : source + ":" + std::to_string(e.mark.line + 1),
                     e.msg);
  }
}

Result<MigPartedConfig> read_mig_parted_config(const std::filesystem::path& path) {
  auto text = read_input_file(path, kMaxConfigFileBytes, "mig-parted config");
  if (!text) return text.error();
  return parse_mig_parted_config(*text, path.string());
}

Result<std::vector<std::optional<MigGpuTarget>>> select_mig_parted_config(
    const MigPartedConfig& config, const std::string& name, const std::vector<MigPartedGpu>& gpus) {
  auto it = config.configs.find(name);
  if (it == config.configs.end()) {
    std::vector<std::string> names;
    for (const auto& c : config.configs)
      names.push_back(c.first);
    return bad_input(name, "no such config in " + config.source, "configs: " + join(names, ", "));
  }
  std::vector<std::optional<MigGpuTarget>> out;
  for (const auto& gpu : gpus) {
    std::optional<MigGpuTarget> target;
    for (const auto& e : it->second) {
      if (applies(e, gpu)) {
        target = MigGpuTarget{e.mig_enabled, e.mig_devices};
        break;
      }
    }
    out.push_back(std::move(target));
  }
  return out;
}

}  // namespace polyaccel
