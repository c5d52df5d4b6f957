#include "audit/support.h"

#include <sstream>

namespace polyaccel::audit {

bool is_vfio_driver(const std::string& driver) {
  return driver == "vfio-pci" || driver == "vfio_pci" || driver.ends_with("vfio_pci") ||
         driver.ends_with("vfio-pci");
}

std::optional<CpuSet> kernel_arg_cpus(const TuningFacts& facts, const std::string& key,
                                      const CpuSet& all_cpus) {
  auto value = facts.kernel_arg(key);
  if (!value) return std::nullopt;
  if (*value == "all") return all_cpus;
  // isolcpus=[flag,...,]list: the flags are words, the list starts at the first digit.
  std::string list = *value;
  std::string kept;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty() || !std::isdigit(static_cast<unsigned char>(item[0]))) continue;
    if (!kept.empty()) kept += ',';
    kept += item;
  }
  return CpuSet::parse_list(kept);
}

CpuIsolation cpu_isolation(const TuningFacts& facts, const CpuSet& all_cpus) {
  CpuIsolation iso;
  if (facts.isolated) {
    iso.scheduler = *facts.isolated;
  } else if (auto s = kernel_arg_cpus(facts, "isolcpus", all_cpus)) {
    iso.scheduler = *s;
  }
  if (facts.nohz_full) {
    iso.nohz_full = *facts.nohz_full;
  } else if (auto s = kernel_arg_cpus(facts, "nohz_full", all_cpus)) {
    iso.nohz_full = *s;
  }
  if (auto s = kernel_arg_cpus(facts, "rcu_nocbs", all_cpus)) iso.rcu_nocbs = *s;
  if (facts.systemd_cpu_affinity) iso.outside_systemd = all_cpus - *facts.systemd_cpu_affinity;
  return iso;
}

CpuSet default_housekeeping(const HostModel& model) {
  CpuSet keep;
  for (const auto& node : model.numa_nodes) {
    auto first = node.cpus.first();
    if (!first) continue;
    keep.set(*first);
    for (const auto& core : model.cores) {
      if (core.pus.test(*first)) keep |= core.pus;
    }
  }
  return keep;
}

std::string hugepage_dir(std::uint64_t size_bytes) {
  return "hugepages-" + std::to_string(size_bytes / 1024) + "kB";
}

std::string cpus_subject(const CpuSet& cpus) {
  return (cpus.count() == 1 ? "cpu " : "cpus ") + cpus.to_list();
}

}  // namespace polyaccel::audit
