// The sharing config: NVIDIA device plugin's config file (`version: v1`, `flags`, `sharing`)
// read as NVIDIA's plugin reads it (../shared/reference/nvidia.md 1.1), plus what NVIDIA's
// plugin parses and then discards or lacks: `devices` honoured (replicas per device), `product`
// (replicas per GPU model) and an allocation policy that hands out distinct GPUs first.
//
//   version: v1
//   flags: {migStrategy: mixed}
//   sharing:
//     timeSlicing:
//       renameByDefault: false
//       failRequestsGreaterThanOne: false
//       allocationPolicy: spread            # polyaccel: spread (default) or packed
//       resources:
//       - name: nvidia.com/gpu
//         replicas: 4
//         devices: all                      # all, a count, or GPU indexes / "gpu:mig" / UUIDs
//         product: H100                     # polyaccel: only GPUs whose product name has this
//         rename: nvidia.com/gpu.h100-shared
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace polyaccel {

enum class SharingStrategy { none, time_slicing, mps };
const char* to_string(SharingStrategy strategy);

// How replicas of one resource are handed out.
enum class ReplicaPolicy {
  spread,  // replicas of distinct physical devices first, the least used first
  packed,  // fill the most used device first
};

// Which devices of a resource an entry replicates.
struct ReplicaDevices {
  bool all = true;
  unsigned count = 0;             // the first `count` devices of the resource, by index
  std::vector<std::string> refs;  // "3", "3:1" (GPU:MIG index), "GPU-<uuid>", "MIG-<uuid>"
};

struct ReplicatedResource {
  std::string name;    // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu"
  std::string rename;  // empty: the name, or <name>.shared under renameByDefault
  ReplicaDevices devices;
  std::string product;  // polyaccel: a substring of the product name, empty for any
  unsigned replicas = 1;
};

struct SharingConfig {
  std::string source;        // the file it came from, for messages
  std::string mig_strategy;  // flags.migStrategy, empty when the file does not set it
  SharingStrategy strategy = SharingStrategy::none;
  bool rename_by_default = false;
  bool fail_requests_greater_than_one = false;
  ReplicaPolicy policy = ReplicaPolicy::spread;
  std::vector<ReplicatedResource> resources;
};

// One device of a resource, as the config can name it.
struct ShareableDevice {
  std::string resource;               // the resource it belongs to without sharing
  unsigned position = 0;              // its place among the resource's devices (for a count)
  unsigned gpu_index = 0;             // the vendor library's index of the physical device
  std::optional<unsigned> mig_index;  // its place among the GPU's MIG devices
  std::string uuid;                   // its own UUID (a MIG device's MIG-...)
  std::string parent_uuid;            // the physical GPU's UUID for a MIG device
  unsigned gpu_instance = 0;          // a MIG device's GI and CI ids (legacy MIG-GPU-<uuid>/gi/ci)
  unsigned compute_instance = 0;
  std::string product;  // "NVIDIA H100 80GB HBM3"
};

// What the config makes of one device: how many replicas, under which resource name.
struct Replication {
  std::string resource;
  unsigned replicas = 1;
};

// Parses the YAML (or JSON) text; `input` names it in messages. An error names the key.
Result<SharingConfig> parse_sharing_config(const std::string& text, const std::string& input);
Result<SharingConfig> read_sharing_config(const std::string& path);

// The replication of one device: the one entry of its resource that selects it, or 1 replica
// under its own name. A device selected by two entries is an Error (bad_input).
Result<Replication> replication_for(const SharingConfig& config, const ShareableDevice& device);

}  // namespace polyaccel
