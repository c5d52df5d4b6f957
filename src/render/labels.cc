#include "render/labels.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <vector>

#include "core/file_io.h"

namespace polyaccel {

namespace {

// A label value: at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric;
// spaces become "-" as GFD does.
std::string label_value(const std::string& raw) {
  std::string v;
  for (char c : raw) {
    if (c == ' ') {
      v += '-';
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') {
      v += c;
    }
  }
  if (v.size() > 63) v.resize(63);
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  while (!v.empty() && !alnum(v.back()))
    v.pop_back();
  while (!v.empty() && !alnum(v.front()))
    v.erase(v.begin());
  return v;
}

// GFD's family from the CUDA compute capability.
std::string nvidia_family(unsigned major, unsigned minor) {
  switch (major) {
    case 1:
      return "tesla";
    case 2:
      return "fermi";
    case 3:
      return "kepler";
    case 5:
      return "maxwell";
    case 6:
      return "pascal";
    case 7:
      return minor < 5 ? "volta" : "turing";
    case 8:
      return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
      return "hopper";
    case 10:
    case 12:
      return "blackwell";
    case 13:
      return "rubin";
  }
  return "undefined";
}

std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes / (1024 * 1024));
}

const Accelerator* first_of(const HostModel& model, Vendor vendor) {
  for (const auto& a : model.accelerators) {
    if (a.vendor == vendor) return &a;
  }
  return nullptr;
}

const MigInstance* mig_instance_of(const HostModel& model, const std::string& profile,
                                   const Accelerator** parent) {
  for (const auto& a : model.accelerators) {
    if (!a.inventory) continue;
    for (const auto& m : a.inventory->mig_instances) {
      std::string p = m.profile_name;
      std::replace(p.begin(), p.end(), '+', '.');
      if (profile.empty() || p == profile) {
        *parent = &a;
        return &m;
      }
    }
  }
  return nullptr;
}

// "3g.40gb" -> 3; "1c.3g.40gb" -> compute 1, gpu 3.
void mig_slices(const std::string& profile, std::string& gi, std::string& ci) {
  gi.clear();
  ci.clear();
  size_t start = 0;
  while (start < profile.size()) {
    size_t dot = profile.find('.', start);
    std::string part = profile.substr(start, dot == std::string::npos ? dot : dot - start);
    if (part.size() > 1 && std::isdigit(static_cast<unsigned char>(part[0]))) {
      if (part.back() == 'g' && gi.empty()) gi = part.substr(0, part.size() - 1);
      if (part.back() == 'c' && ci.empty()) ci = part.substr(0, part.size() - 1);
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (ci.empty()) ci = gi;
}

void nvidia_labels(const HostModel& model, const LabelOptions& options, NodeLabels& l) {
  const Accelerator* gpu = first_of(model, Vendor::nvidia);
  if (!gpu) return;
  l["nvidia.com/gpu.present"] = "true";
  l["nvidia.com/mig.strategy"] = options.mig_strategy;
  const AcceleratorInventory* inv = gpu->inventory ? &*gpu->inventory : nullptr;
  if (inv) {
    l["nvidia.com/mig.capable"] = inv->mig_enabled.has_value() ? "true" : "false";
    if (auto cc = compute_capability_numbers(inv->compute_capability)) {
      const auto [major, minor] = *cc;
      l["nvidia.com/gpu.compute.major"] = std::to_string(major);
      l["nvidia.com/gpu.compute.minor"] = std::to_string(minor);
      l["nvidia.com/gpu.family"] = nvidia_family(major, minor);
    }
    // As GFD: the parts of the driver's version string as they are ("550.90.07": rev "07").
    std::vector<std::string> parts;
    for (size_t start = 0; start <= inv->driver_version.size();) {
      size_t dot = inv->driver_version.find('.', start);
      if (dot == std::string::npos) dot = inv->driver_version.size();
      parts.push_back(inv->driver_version.substr(start, dot - start));
      start = dot + 1;
    }
    if (parts.size() >= 2 && !parts[0].empty()) {
      l["nvidia.com/cuda.driver-version.major"] = label_value(parts[0]);
      l["nvidia.com/cuda.driver-version.minor"] = label_value(parts[1]);
      l["nvidia.com/cuda.driver-version.revision"] = parts.size() > 2 ? label_value(parts[2]) : "";
      l["nvidia.com/cuda.driver-version.full"] = label_value(inv->driver_version);
    }
  }
  const std::string product = label_value(gpu->name);
  for (const auto& r : options.resources) {
    if (r.name.rfind("nvidia.com/", 0) != 0) continue;
    const std::string k = r.name + ".";
    l[k + "count"] = std::to_string(r.count);
    l[k + "replicas"] = std::to_string(r.replicas);
    l[k + "sharing-strategy"] = r.sharing;
    const bool is_mig = r.name.rfind("nvidia.com/mig-", 0) == 0 ||
                        (r.name == "nvidia.com/gpu" && options.mig_strategy == "single");
    std::string suffix = r.replicas > 1 && !r.renamed ? "-SHARED" : "";
    if (!is_mig) {
      l[k + "product"] = label_value(product + suffix);
      if (inv) l[k + "memory"] = mib(inv->memory_total_bytes);
      continue;
    }
    const Accelerator* parent = nullptr;
    std::string profile = r.name == "nvidia.com/gpu" ? "" : r.name.substr(15);
    const MigInstance* m = mig_instance_of(model, profile, &parent);
    if (!m) continue;
    std::string p = m->profile_name;
    std::replace(p.begin(), p.end(), '+', '.');
    l[k + "product"] = label_value(label_value(parent->name) + "-MIG-" + p + suffix);
    l[k + "memory"] = mib(m->memory_bytes);
    std::string gi, ci;
    mig_slices(p, gi, ci);
    if (!gi.empty()) {
      l[k + "slices.gi"] = gi;
      l[k + "slices.ci"] = ci;
    }
  }
}

void amd_labels(const HostModel& model, const LabelOptions& options, NodeLabels& l) {
  const Accelerator* gpu = first_of(model, Vendor::amd);
  if (!gpu) return;
  char id[8];
  std::snprintf(id, sizeof id, "%04x", gpu->pci.device_id);
  l["amd.com/gpu.device-id"] = id;
  if (!gpu->name.empty()) l["amd.com/gpu.product-name"] = label_value(gpu->name);
  if (gpu->inventory) {
    const auto& inv = *gpu->inventory;
    if (inv.memory_total_bytes) l["amd.com/gpu.vram"] = mib(inv.memory_total_bytes);
    if (!inv.gfx_version.empty()) l["amd.com/gpu.family"] = label_value(inv.gfx_version);
    if (!inv.compute_partition.empty() && !inv.memory_partition.empty()) {
      std::string p = inv.compute_partition + "_" + inv.memory_partition;
      std::transform(p.begin(), p.end(), p.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      l["amd.com/compute-memory-partition"] = p;
    }
  }
  for (const auto& r : options.resources) {
    if (r.name.rfind("amd.com/", 0) != 0) continue;
    l[r.name + ".count"] = std::to_string(r.count);
    l[r.name + ".replicas"] = std::to_string(r.replicas);
    l[r.name + ".sharing-strategy"] = r.sharing;
  }
}

void gaudi_labels(const HostModel& model, const LabelOptions& options, NodeLabels& l) {
  const Accelerator* hpu = first_of(model, Vendor::intel_gaudi);
  if (!hpu) return;
  char id[8];
  std::snprintf(id, sizeof id, "%04x", hpu->pci.device_id);
  l["habana.ai/gaudi.device-id"] = id;
  if (!hpu->name.empty()) l["habana.ai/gaudi.product"] = label_value(hpu->name);
  if (hpu->inventory) {
    if (hpu->inventory->memory_total_bytes)
      l["habana.ai/gaudi.memory"] = mib(hpu->inventory->memory_total_bytes);
    if (!hpu->inventory->driver_version.empty())
      l["habana.ai/gaudi.driver-version"] = label_value(hpu->inventory->driver_version);
  }
  for (const auto& r : options.resources) {
    if (r.name.rfind("habana.ai/", 0) != 0) continue;
    l[r.name + ".count"] = std::to_string(r.count);
    l[r.name + ".replicas"] = std::to_string(r.replicas);
    l[r.name + ".sharing-strategy"] = r.sharing;
  }
}

// NUMA and NIC facts: what a scheduler or a person needs to place multi-node jobs.
void host_labels(const HostModel& model, NodeLabels& l) {
  l["polyaccel.io/numa-nodes"] = std::to_string(model.numa_nodes.size());
  std::set<unsigned> acc_numa;
  unsigned with_near_nic = 0, nvlinked = 0;
  for (size_t i = 0; i < model.accelerators.size(); ++i) {
    const auto& a = model.accelerators[i];
    acc_numa.insert(a.pci.numa_nodes.begin(), a.pci.numa_nodes.end());
    auto ai = model.links.index_of(a.id);
    if (!ai) continue;
    bool near = false, linked = false;
    for (const auto& n : a.closest_nics) {
      auto ni = model.links.index_of(n);
      const Nic* nic = model.nic(n);
      if (ni && nic && nic->rdma_capable() && model.links.at(*ai, *ni).level <= LinkLevel::pxb)
        near = true;
    }
    for (size_t j = 0; j < model.accelerators.size(); ++j) {
      auto bj = model.links.index_of(model.accelerators[j].id);
      if (j != i && bj) {
        auto lvl = model.links.at(*ai, *bj).level;
        linked |= lvl == LinkLevel::nvlink || lvl == LinkLevel::xgmi;
      }
    }
    with_near_nic += near;
    nvlinked += linked;
  }
  if (!model.accelerators.empty()) {
    l["polyaccel.io/accelerators"] = std::to_string(model.accelerators.size());
    l["polyaccel.io/accelerator-numa-nodes"] = std::to_string(acc_numa.size());
    l["polyaccel.io/accelerators-with-pcie-local-rdma-nic"] = std::to_string(with_near_nic);
    l["polyaccel.io/accelerators-peer-linked"] = std::to_string(nvlinked);
  }
  unsigned rdma = 0;
  std::set<std::string> fabrics;
  for (const auto& n : model.nics) {
    if (!n.rdma_capable()) continue;
    ++rdma;
    if (!n.fabric.empty()) fabrics.insert(n.fabric);
  }
  l["polyaccel.io/rdma-nics"] = std::to_string(rdma);
  std::string f;
  for (const auto& x : fabrics)
    f += (f.empty() ? "" : ".") + x;
  if (!f.empty()) l["polyaccel.io/rdma-fabrics"] = f;
}

}  // namespace

NodeLabels node_labels(const HostModel& model, const LabelOptions& options) {
  NodeLabels l;
  nvidia_labels(model, options, l);
  amd_labels(model, options, l);
  gaudi_labels(model, options, l);
  host_labels(model, l);
  return l;
}

std::string feature_file_text(const NodeLabels& labels) {
  std::string out = "# Written by polyaccel agent; node-feature-discovery reads it.\n";
  for (const auto& [k, v] : labels)
    out += k + "=" + v + "\n";
  return out;
}

Result<bool> write_feature_file(const std::string& path, const NodeLabels& labels) {
  std::string text = feature_file_text(labels);
  auto old = read_text_file(path);
  if (old && *old == text) return false;
  // nfd-worker runs as another user: the file must be readable by all (0644).
  Status s = write_file_atomically(path, text, 0644);
  if (!s) return s.error();
  return true;
}

}  // namespace polyaccel
