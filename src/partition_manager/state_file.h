// The partition manager's record of an apply in progress, written atomically (core/file_io.h)
// before each step that touches the GPUs, so that an agent killed in the middle knows on restart
// which GPUs it had withdrawn and which config it was applying: it then finishes the apply (a
// plan made again against what the GPUs have now completes what was half done) or reports
// `failed`; it never advertises a half-configured GPU silently.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace polyaccel {

inline constexpr int kPartitionStateSchemaVersion = 1;

enum class ApplyPhase {
  withdrawn,  // the changing GPUs are no longer advertised; pods holding them are waited for
  applying,   // the GPUs are being changed
  rebooting,  // a mode change waits for a GPU reset or a reboot; GPUs stay withdrawn
  done,       // finished: success
  failed,     // finished: failed; `gpus` stay withdrawn when a change had begun on them
};
const char* to_string(ApplyPhase phase);

struct PartitionApplyRecord {
  std::string label;   // the label the config came from: "nvidia.com/mig.config"
  std::string config;  // its value: "all-1g.18gb"
  ApplyPhase phase = ApplyPhase::done;
  std::vector<std::string> gpus;  // PCI bus ids of the GPUs the apply changes
  std::string reason;             // why it failed, when it did

  bool unfinished() const {
    return phase == ApplyPhase::withdrawn || phase == ApplyPhase::applying ||
           phase == ApplyPhase::rebooting;
  }
};

// The record in `text`; bad_input naming `source` and the field for anything else.
Result<PartitionApplyRecord> parse_partition_apply_record(const std::string& text,
                                                          const std::string& source);
// nullopt when the file does not exist.
Result<std::optional<PartitionApplyRecord>> read_partition_apply_record(
    const std::filesystem::path& path);
Status write_partition_apply_record(const std::filesystem::path& path,
                                    const PartitionApplyRecord& record);

}  // namespace polyaccel
