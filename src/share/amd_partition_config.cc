#include "share/amd_partition_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/strings.h"

namespace polyaccel {

namespace {

const std::vector<std::string> kCompute = {"SPX", "DPX", "QPX", "CPX"};
const std::vector<std::string> kMemory = {"NPS1", "NPS2", "NPS4", "NPS8"};
constexpr unsigned kMaxGpus = 64;

bool listed(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

}  // namespace

Result<AmdPartitionConfig> parse_amd_partition_config(const std::string& text,
                                                      const std::string& source) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return bad_input(source, "is not a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "gpu-config-profiles" && key != "gpuClientSystemdServices")
      return bad_input(source, "unknown key " + key);
  }
  if (!doc.contains("gpu-config-profiles") || !doc["gpu-config-profiles"].is_object())
    return bad_input(source, "has no gpu-config-profiles object");
  AmdPartitionConfig config;
  for (const auto& [name, p] : doc["gpu-config-profiles"].items()) {
    std::string at = "profile " + name;
    if (name.empty() || name.size() > 63)
      return bad_input(source, at + ": a name of 1 to 63 characters (a label value)");
    if (!p.is_object()) return bad_input(source, at + " is not an object");
    AmdPartitionProfile profile;
    for (const auto& [key, value] : p.items()) {
      if (key != "skippedGPUs" && key != "profiles")
        return bad_input(source, at + ": unknown key " + key);
    }
    if (p.contains("skippedGPUs")) {
      const auto& s = p["skippedGPUs"];
      if (!s.is_object() || !s.contains("ids") || !s["ids"].is_array())
        return bad_input(source, at + ": skippedGPUs must be {\"ids\": [...]}");
      std::set<unsigned> seen;
      for (const auto& id : s["ids"]) {
        if (!id.is_number_unsigned() || id.get<std::uint64_t>() >= kMaxGpus)
          return bad_input(
              source, at + ": skippedGPUs ids are GPU numbers 0.." + std::to_string(kMaxGpus - 1));
        unsigned v = id.get<unsigned>();
        if (!seen.insert(v).second)
          return bad_input(source, at + ": GPU " + std::to_string(v) + " is skipped twice");
        profile.skipped.push_back(v);
      }
    }
    if (!p.contains("profiles") || !p["profiles"].is_array() || p["profiles"].empty())
      return bad_input(source, at + ": profiles must be a non-empty list");
    for (const auto& s : p["profiles"]) {
      if (!s.is_object()) return bad_input(source, at + ": a profiles entry is not an object");
      for (const auto& [key, value] : s.items()) {
        if (key != "computePartition" && key != "memoryPartition" && key != "numGPUsAssigned")
          return bad_input(source, at + ": unknown key " + key);
      }
      AmdPartitionSet set;
      if (!s.contains("computePartition") || !s["computePartition"].is_string() ||
          !listed(kCompute, set.compute = s["computePartition"].get<std::string>()))
        return bad_input(source, at + ": computePartition must be one of " + join(kCompute, ", "));
      if (!s.contains("memoryPartition") || !s["memoryPartition"].is_string() ||
          !listed(kMemory, set.memory = s["memoryPartition"].get<std::string>()))
        return bad_input(source, at + ": memoryPartition must be one of " + join(kMemory, ", "));
      if (!s.contains("numGPUsAssigned") || !s["numGPUsAssigned"].is_number_unsigned() ||
          s["numGPUsAssigned"].get<std::uint64_t>() < 1 ||
          s["numGPUsAssigned"].get<std::uint64_t>() > kMaxGpus)
        return bad_input(source, at + ": numGPUsAssigned must be 1.." + std::to_string(kMaxGpus));
      set.gpus = s["numGPUsAssigned"].get<unsigned>();
      if (!profile.sets.empty() && profile.sets.front().memory != set.memory)
        return bad_input(source, at + ": one memoryPartition per profile (" +
                                     profile.sets.front().memory + " and " + set.memory + ")");
      profile.sets.push_back(set);
    }
    config.profiles[name] = std::move(profile);
  }
  return config;
}

Result<std::vector<std::optional<AmdPartitionTarget>>> select_amd_partition_profile(
    const AmdPartitionConfig& config, const std::string& name, std::size_t gpu_count) {
  auto it = config.profiles.find(name);
  if (it == config.profiles.end()) {
    std::vector<std::string> names;
    for (const auto& [n, p] : config.profiles)
      names.push_back(n);
    return bad_input(name, "no such profile (there are: " + join(names, ", ") + ")");
  }
  const AmdPartitionProfile& p = it->second;
  std::size_t assigned = 0;
  for (const auto& s : p.sets)
    assigned += s.gpus;
  for (unsigned id : p.skipped) {
    if (id >= gpu_count)
      return bad_input(name, "skips GPU " + std::to_string(id) + " of a node with " +
                                 std::to_string(gpu_count) + " GPUs");
  }
  if (assigned + p.skipped.size() != gpu_count) {
    return bad_input(name, "assigns " + std::to_string(assigned) + " GPUs and skips " +
                               std::to_string(p.skipped.size()) + " on a node with " +
                               std::to_string(gpu_count) + " (they must add up)");
  }
  std::vector<std::optional<AmdPartitionTarget>> out(gpu_count);
  std::size_t set = 0;
  unsigned used = 0;
  for (std::size_t gpu = 0; gpu < gpu_count; ++gpu) {
    if (std::find(p.skipped.begin(), p.skipped.end(), gpu) != p.skipped.end()) continue;
    while (used == p.sets[set].gpus) {
      ++set;
      used = 0;
    }
    out[gpu] = AmdPartitionTarget{p.sets[set].compute, p.sets[set].memory};
    ++used;
  }
  return out;
}

}  // namespace polyaccel
