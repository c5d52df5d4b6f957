#include "partition_manager/state_file.h"

#include <nlohmann/json.hpp>
#include <system_error>

#include "core/file_io.h"
#include "core/pci_address.h"

namespace polyaccel {

namespace {

constexpr ApplyPhase kPhases[] = {ApplyPhase::withdrawn, ApplyPhase::applying,
                                  ApplyPhase::rebooting, ApplyPhase::done, ApplyPhase::failed};
constexpr std::size_t kMaxGpus = 64;
constexpr std::size_t kMaxText = 4096;

}  // namespace

const char* to_string(ApplyPhase phase) {
  switch (phase) {
    case ApplyPhase::withdrawn:
      return "withdrawn";
    case ApplyPhase::applying:
      return "applying";
    case ApplyPhase::rebooting:
      return "rebooting";
    case ApplyPhase::done:
      return "done";
    case ApplyPhase::failed:
      return "failed";
  }
  return "failed";
}

Result<PartitionApplyRecord> parse_partition_apply_record(const std::string& text,
                                                          const std::string& source) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return bad_input(source, "is not a JSON object");
  auto string_field = [&](const char* key, std::string& out) -> Status {
    if (!doc.contains(key) || !doc[key].is_string())
      return bad_input(source, std::string(key) + " is missing or not a string");
    out = doc[key].get<std::string>();
    if (out.size() > kMaxText) return bad_input(source, std::string(key) + " is too long");
    return Ok{};
  };
  if (!doc.contains("schema_version") || doc["schema_version"] != kPartitionStateSchemaVersion)
    return bad_input(source,
                     "schema_version is not " + std::to_string(kPartitionStateSchemaVersion));
  PartitionApplyRecord r;
  std::string phase;
  for (auto [key, out] : {std::pair{"label", &r.label}, std::pair{"config", &r.config},
                          std::pair{"phase", &phase}, std::pair{"reason", &r.reason}}) {
    if (auto st = string_field(key, *out); !st) return st.error();
  }
  bool known = false;
  for (ApplyPhase p : kPhases) {
    if (phase == to_string(p)) {
      r.phase = p;
      known = true;
    }
  }
  if (!known)
    return bad_input(source, "phase '" + phase +
                                 "' is not one of withdrawn, applying, "
                                 "rebooting, done, failed");
  if (!doc.contains("gpus") || !doc["gpus"].is_array() || doc["gpus"].size() > kMaxGpus)
    return bad_input(source,
                     "gpus is missing, not an array or longer than " + std::to_string(kMaxGpus));
  for (const auto& g : doc["gpus"]) {
    if (!g.is_string()) return bad_input(source, "gpus holds a value that is not a string");
    auto bus = PciAddress::parse(g.get<std::string>());
    if (!bus) return bad_input(source, "gpus: '" + g.get<std::string>() + "' is not a PCI address");
    r.gpus.push_back(g.get<std::string>());
  }
  return r;
}

Result<std::optional<PartitionApplyRecord>> read_partition_apply_record(
    const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
    return std::optional<PartitionApplyRecord>{};
  auto text = read_input_file(path, kMaxConfigFileBytes, "partition state file");
  if (!text) return text.error();
  auto r = parse_partition_apply_record(*text, path.string());
  if (!r) return r.error();
  return std::optional<PartitionApplyRecord>{*r};
}

Status write_partition_apply_record(const std::filesystem::path& path,
                                    const PartitionApplyRecord& record) {
  nlohmann::json doc = {{"schema_version", kPartitionStateSchemaVersion},
                        {"label", record.label},
                        {"config", record.config},
                        {"phase", to_string(record.phase)},
                        {"gpus", record.gpus},
                        {"reason", record.reason}};
  return write_file_atomically(path, doc.dump(2) + "\n", 0644);
}

}  // namespace polyaccel
