// Node labels as a node-feature-discovery feature file (features.d/<name>): GPU Feature
// Discovery's labels for NVIDIA (../shared/reference/nvidia.md 2), the same facts for AMD
// (amd.com/, as AMD's node labeller names them) and Gaudi (habana.ai/), and polyaccel.io/ facts
// about NUMA and NICs that no vendor labels. Pure, but for the one write at the end.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"

namespace polyaccel {

// What the device plugin advertises for one resource, as GFD labels it.
struct LabeledResource {
  std::string name;       // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu"
  unsigned count = 0;     // physical devices (or MIG devices), replicas not counted
  unsigned replicas = 1;  // the most replicas of one device
  std::string sharing;    // "none", "time-slicing", "mps"
  bool renamed = false;   // the shared resource has its own name (no -SHARED suffix)
};

struct LabelOptions {
  std::string mig_strategy = "none";
  std::vector<LabeledResource> resources;
};

using NodeLabels = std::map<std::string, std::string>;

NodeLabels node_labels(const HostModel& model, const LabelOptions& options);

// "name=value" lines, sorted: the feature file's content.
std::string feature_file_text(const NodeLabels& labels);

// Writes the file atomically when its content differs; true when it wrote.
Result<bool> write_feature_file(const std::string& path, const NodeLabels& labels);

}  // namespace polyaccel
