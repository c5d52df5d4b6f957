#include "share/time_slicing.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "core/file_io.h"
#include "core/number.h"

namespace polyaccel {

const char* to_string(SharingStrategy strategy) {
  switch (strategy) {
    case SharingStrategy::none:
      return "none";
    case SharingStrategy::time_slicing:
      return "time-slicing";
    case SharingStrategy::mps:
      return "mps";
  }
  return "none";
}

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// 8-4-4-4-12 hex digits, as Go's uuid.Parse takes them.
bool is_uuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// GPU index, "gpu:mig" index, GPU-<uuid>, MIG-<uuid> or the legacy MIG-GPU-<uuid>/<gi>/<ci>.
bool is_device_ref(const std::string& s) {
  if (all_digits(s)) return true;
  auto colon = s.find(':');
  if (colon != std::string::npos && all_digits(s.substr(0, colon)) &&
      all_digits(s.substr(colon + 1)))
    return true;
  if (s.rfind("GPU-", 0) == 0) return is_uuid(s.substr(4));
  if (s.rfind("MIG-", 0) != 0) return false;
  std::string rest = s.substr(4);
  if (is_uuid(rest)) return true;
  if (rest.rfind("GPU-", 0) != 0 || rest.size() < 40 || !is_uuid(rest.substr(4, 36))) return false;
  std::string tail = rest.substr(40);  // "/<gi>/<ci>"
  auto slash = tail.find('/', 1);
  return tail.size() > 1 && tail[0] == '/' && slash != std::string::npos &&
         all_digits(tail.substr(1, slash - 1)) && all_digits(tail.substr(slash + 1));
}

// An extended resource name: <domain>/<name>, the name at most 63 characters of
// [A-Za-z0-9._-] starting and ending with an alphanumeric.
bool is_resource_name(const std::string& s) {
  auto slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || s.find('/', slash + 1) != std::string::npos)
    return false;
  std::string name = s.substr(slash + 1);
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// Bounds past any node: replicas are advertised to kubelet one device ID each, so 4294967296
// replicas must be refused, not wrap to 0 and hide every GPU.
constexpr unsigned kMaxReplicas = 1024;
constexpr unsigned kMaxDeviceCount = 1024;

Status parse_devices(const YAML::Node& v, const std::string& where, ReplicaDevices& out) {
  if (v.IsScalar()) {
    std::string s = v.Scalar();
    if (s == "all") {
      out = {};
      return Ok{};
    }
    if (all_digits(s)) {
      auto n = parse_integer<unsigned>(s, "count", 1, kMaxDeviceCount);
      if (!n) return bad_input(where, "a count of devices: " + n.error().problem);
      out.all = false;
      out.count = *n;
      return Ok{};
    }
    return bad_input(where, "'" + s + "' is neither 'all', a count nor a list of devices");
  }
  if (!v.IsSequence()) return bad_input(where, "must be 'all', a count or a list of devices");
  out.all = false;
  for (const auto& item : v) {
    std::string s = item.IsScalar() ? item.Scalar() : std::string();
    if (!is_device_ref(s)) {
      return bad_input(where, "'" + s + "' is not a GPU index, a GPU:MIG index or a UUID");
    }
    out.refs.push_back(s);
  }
  if (out.refs.empty()) return bad_input(where, "the list of devices is empty");
  return Ok{};
}

// One block of `sharing`: timeSlicing or mps.
Status parse_block(const YAML::Node& block, const std::string& prefix, const std::string& input,
                   SharingConfig& cfg) {
  if (!block.IsMap()) return bad_input(input, prefix + " must be a mapping");
  YAML::Node resources;
  for (const auto& kv : block) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "renameByDefault") {
      cfg.rename_by_default = v.as<bool>();
    } else if (key == "failRequestsGreaterThanOne") {
      cfg.fail_requests_greater_than_one = v.as<bool>();
    } else if (key == "allocationPolicy") {
      std::string p = v.as<std::string>();
      if (p != "spread" && p != "packed")
        return bad_input(input, prefix + ".allocationPolicy: '" + p + "' is not spread or packed");
      cfg.policy = p == "packed" ? ReplicaPolicy::packed : ReplicaPolicy::spread;
    } else if (key == "resources") {
      resources = v;
    } else if (key == "strategy") {
      // Older NVIDIA releases had this key with only the empty value.
      if (!v.as<std::string>().empty())
        return bad_input(input, prefix + ".strategy: unknown time-slicing strategy '" +
                                    v.as<std::string>() + "'");
    } else {
      return bad_input(input, "unknown key " + prefix + "." + key,
                       "known: renameByDefault, failRequestsGreaterThanOne, allocationPolicy, "
                       "resources");
    }
  }
  if (!resources || !resources.IsSequence() || resources.size() == 0) {
    return bad_input(input, prefix + ".resources: no resources specified");
  }
  for (size_t i = 0; i < resources.size(); ++i) {
    const YAML::Node& r = resources[i];
    const std::string where = prefix + ".resources[" + std::to_string(i) + "]";
    if (!r.IsMap()) return bad_input(input, where + " must be a mapping");
    ReplicatedResource res;
    bool have_replicas = false;
    for (const auto& kv : r) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "name") {
        res.name = v.as<std::string>();
      } else if (key == "rename") {
        res.rename = v.as<std::string>();
      } else if (key == "replicas") {
        auto n = parse_integer<unsigned>(v.IsScalar() ? v.Scalar() : "", where + ".replicas", 1,
                                         kMaxReplicas);
        if (!n) return bad_input(input, n.error().message());
        res.replicas = *n;
        have_replicas = true;
      } else if (key == "devices") {
        Status s = parse_devices(v, input + ": " + where + ".devices", res.devices);
        if (!s) return s;
      } else if (key == "product") {
        res.product = v.as<std::string>();
      } else {
        return bad_input(input, "unknown key " + where + "." + key,
                         "known: name, rename, replicas, devices, product");
      }
    }
    if (res.name.empty()) return bad_input(input, where + ": no resource name specified");
    if (!is_resource_name(res.name))
      return bad_input(input, where + ".name: '" + res.name + "' is not a resource name");
    if (!res.rename.empty() && !is_resource_name(res.rename) &&
        !is_resource_name(res.name.substr(0, res.name.find('/') + 1) + res.rename)) {
      return bad_input(input, where + ".rename: '" + res.rename + "' is not a resource name");
    }
    if (!have_replicas) return bad_input(input, where + ": no replicas specified");
    cfg.resources.push_back(std::move(res));
  }
  return Ok{};
}

}  // namespace

Result<SharingConfig> parse_sharing_config(const std::string& text, const std::string& input) {
  SharingConfig cfg;
  cfg.source = input;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return bad_input(input, "is not valid YAML: " + e.msg);
  }
  if (!root || root.IsNull()) return cfg;
  if (!root.IsMap()) return bad_input(input, "must be a mapping with `version: v1`");
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "version") {
        if (v.as<std::string>() != "v1")
          return bad_input(input, "unknown version '" + v.as<std::string>() + "'",
                           "the only version is v1");
      } else if (key == "flags") {
        // Shared with NVIDIA's plugin and GFD; of them only the MIG strategy concerns us.
        if (v.IsMap() && v["migStrategy"]) {
          cfg.mig_strategy = v["migStrategy"].as<std::string>();
          if (cfg.mig_strategy != "none" && cfg.mig_strategy != "single" &&
              cfg.mig_strategy != "mixed")
            return bad_input(input, "flags.migStrategy: '" + cfg.mig_strategy +
                                        "' is not none, single or mixed");
        }
      } else if (key == "resources" || key == "imex") {
        // NVIDIA-only sections (resource patterns, IMEX channels): accepted, not used.
      } else if (key == "sharing") {
        if (!v.IsMap()) return bad_input(input, "sharing must be a mapping");
        YAML::Node ts = v["timeSlicing"];
        YAML::Node mps = v["mps"];
        for (const auto& s : v) {
          std::string k = s.first.as<std::string>();
          if (k != "timeSlicing" && k != "mps")
            return bad_input(input, "unknown key sharing." + k, "known: timeSlicing, mps");
        }
        // As NVIDIA's plugin: MPS wins when both are given.
        if (mps) {
          cfg.strategy = SharingStrategy::mps;
          cfg.fail_requests_greater_than_one = true;  // NVIDIA's default for MPS
          Status s = parse_block(mps, "sharing.mps", input, cfg);
          if (!s) return s.error();
        } else if (ts) {
          cfg.strategy = SharingStrategy::time_slicing;
          Status s = parse_block(ts, "sharing.timeSlicing", input, cfg);
          if (!s) return s.error();
        }
      } else {
        return bad_input(input, "unknown key " + key,
                         "known: version, flags, resources, sharing, imex");
      }
    }
  } catch (const YAML::Exception& e) {
    return bad_input(input, "bad value: " + e.msg);
  }
  return cfg;
}

Result<SharingConfig> read_sharing_config(const std::string& path) {
  auto text = read_input_file(path, kMaxConfigFileBytes, "sharing config");
  if (!text) return text.error();
  return parse_sharing_config(*text, path);
}

namespace {

bool selects(const ReplicatedResource& r, const ShareableDevice& d) {
  if (r.name != d.resource) return false;
  if (!r.product.empty() && d.product.find(r.product) == std::string::npos) return false;
  if (r.devices.all) return true;
  if (r.devices.count > 0) return d.position < r.devices.count;
  const std::string index = std::to_string(d.gpu_index);
  for (const auto& ref : r.devices.refs) {
    if (d.mig_index) {
      if (ref == index + ":" + std::to_string(*d.mig_index)) return true;
    } else if (ref == index) {
      return true;
    }
    if (!d.uuid.empty() && ref == d.uuid) return true;
    // The legacy MIG-GPU-<uuid>/<gi>/<ci> form names the MIG device through its parent.
    if (d.mig_index && ref == "MIG-" + d.parent_uuid + "/" + std::to_string(d.gpu_instance) + "/" +
                                  std::to_string(d.compute_instance))
      return true;
  }
  return false;
}

}  // namespace

Result<Replication> replication_for(const SharingConfig& config, const ShareableDevice& device) {
  Replication out{device.resource, 1};
  const ReplicatedResource* match = nullptr;
  for (const auto& r : config.resources) {
    if (!selects(r, device)) continue;
    if (match) {
      return bad_input(config.source,
                       "device " +
                           (device.uuid.empty() ? std::to_string(device.gpu_index) : device.uuid) +
                           " of " + device.resource + " is selected by two sharing entries");
    }
    match = &r;
  }
  if (!match) return out;
  out.replicas = match->replicas;
  if (!match->rename.empty()) {
    out.resource = match->rename.find('/') == std::string::npos
                       ? device.resource.substr(0, device.resource.find('/') + 1) + match->rename
                       : match->rename;
  } else if (config.rename_by_default) {
    out.resource = device.resource + ".shared";
  }
  return out;
}

}  // namespace polyaccel
