// A finding of the tuning audit: what is wrong, where, and how to fix it. Plain values, so the
// exporter can publish them and tests can compare them.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace polyaccel {

enum class Severity { info, warning, critical };
const char* to_string(Severity severity);
std::optional<Severity> parse_severity(const std::string& text);

// A write that is safe at run time and that `audit --fix` applies: a path relative to the
// sysfs/procfs root and the value to write there.
struct RuntimeWrite {
  std::string path;  // "sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages"
  std::string value;
  bool operator==(const RuntimeWrite&) const = default;
};

// How to fix a finding. `summary` says it for people; the lists say it for `audit --emit`
// (which writes them as files) and `audit --fix` (which applies `runtime`).
struct Remedy {
  std::string summary;
  std::vector<std::string> kernel_args;   // "iommu=pt", "isolcpus=managed_irq,domain,2-15"
  std::vector<std::string> sysctls;       // "kernel.numa_balancing = 0"
  std::vector<std::string> modprobe;      // "options vfio-pci ids=10de:2330"
  std::vector<std::string> modules_load;  // "nvidia_peermem"
  std::vector<std::string> systemd;       // "CPUAffinity=0-1 56-57" for system.conf.d
  std::vector<RuntimeWrite> runtime;      // safe now, also lost at reboot
  std::vector<std::string> commands;      // for the operator to run or review
  // True when what `runtime` writes is all of the fix (nothing waits for a reboot).
  bool runtime_is_complete() const;
};

struct Finding {
  std::string id;  // stable: "numa.balancing", "pcie.acs-redirect"
  Severity severity = Severity::warning;
  std::string subject;  // "kernel", "node1", "0000:3b:00.0 (gpu0)", "cpus 0-27"
  std::string observed;
  std::string expected;
  Remedy remedy;
};

}  // namespace polyaccel
