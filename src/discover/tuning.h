// Tuning facts: what the audit needs beyond the HostModel (kernel command line, sysctls, CPU
// frequency governors, CPU isolation, loaded modules, IOMMU groups, bound drivers, PCIe ACS,
// swap), read through a sysfs/procfs/etc root into one plain value. Reading never fails: a file
// that cannot be read or parsed is recorded in `problems` and the fact stays unknown.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/cpuset.h"
#include "core/pci_address.h"
#include "discover/container_runtime.h"

namespace polyaccel {

// The bits of the PCIe ACS control register (extended capability 0x000D, offset 6).
enum AcsBit : std::uint16_t {
  kAcsSourceValidation = 1 << 0,
  kAcsTranslationBlocking = 1 << 1,
  kAcsP2pRequestRedirect = 1 << 2,
  kAcsP2pCompletionRedirect = 1 << 3,
  kAcsUpstreamForwarding = 1 << 4,
  kAcsP2pEgressControl = 1 << 5,
  kAcsDirectTranslatedP2p = 1 << 6,
};

// One PCI function as sysfs shows it.
struct PciFunctionFacts {
  PciAddress address;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint32_t class_code = 0;         // 0x060400: PCI-to-PCI bridge
  std::optional<int> numa_node;         // -1: the firmware gave no locality
  std::string driver;                   // bound driver, empty when none
  std::string driver_override;          // empty when none
  std::optional<unsigned> iommu_group;  // absent when the IOMMU is off
  // The bridges above it, from the root port down to its own upstream port (sysfs path order).
  std::vector<PciAddress> upstream_bridges;
  // ACS control register: nullopt when the function has no ACS capability or the config space
  // could not be read past 256 bytes (needs root); acs_readable tells the two apart.
  std::optional<std::uint16_t> acs_control;
  bool acs_readable = false;
  // max_link_speed/max_link_width of the port right above it, 0 when unknown.
  double port_max_speed_gts = 0;
  unsigned port_max_width = 0;

  bool is_bridge() const { return (class_code >> 8) == 0x0604; }
};

struct IommuGroupFacts {
  unsigned id = 0;
  std::string type;  // "identity" (passthrough), "DMA", "DMA-FQ", "blocked", or empty
  std::vector<PciAddress> devices;
};

// A file the audit could not use, and why.
struct FactProblem {
  std::string path;  // relative to the root: "proc/sys/kernel/numa_balancing"
  std::string problem;
};

struct TuningFacts {
  std::string root;  // what was read: "/" for the live host

  // /proc/cmdline split as the kernel does (quotes group), key and value; a bare flag has "".
  std::vector<std::pair<std::string, std::string>> kernel_args;
  bool kernel_cmdline_known = false;
  std::string kernel_release;  // "6.1.0-18-amd64", from proc/sys/kernel/osrelease or proc/version
  std::string cpu_vendor;      // "GenuineIntel", "AuthenticAMD", "" when unknown

  std::optional<int> numa_balancing;          // proc/sys/kernel/numa_balancing
  std::map<unsigned, std::string> governors;  // CPU → cpufreq scaling_governor
  std::optional<CpuSet> isolated;             // sys/devices/system/cpu/isolated
  std::optional<CpuSet> nohz_full;            // sys/devices/system/cpu/nohz_full
  // systemd's CPUAffinity= from etc/systemd/system.conf and system.conf.d/*.conf; absent when
  // unset (host services may run on every CPU).
  std::optional<CpuSet> systemd_cpu_affinity;

  std::set<std::string> modules;  // loaded modules (proc/modules), '-' written as '_'
  bool modules_known = false;
  // "options <module> ..." lines of etc/modprobe.d/*.conf: module → its options text.
  std::map<std::string, std::vector<std::string>> modprobe_options;
  std::string nvidia_driver_text;  // proc/driver/nvidia/version, empty when absent

  bool iommu_present = false;  // sys/class/iommu has an entry
  bool iommu_known = false;    // sys/class/iommu exists (empty: the IOMMU is off)
  std::map<unsigned, IommuGroupFacts> iommu_groups;
  std::map<PciAddress, PciFunctionFacts> pci;

  // hugetlbfs mounts of proc/mounts: mount point -> page size (pagesize=, else the default
  // huge page size of proc/meminfo). Known only where proc/mounts could be read.
  std::map<std::string, std::uint64_t> hugetlbfs_mounts;
  bool mounts_known = false;

  std::optional<std::uint64_t> swap_total_bytes;
  std::vector<std::string> swap_devices;  // proc/swaps

  // Container runtimes, CDI specs, toolkits, NVIDIA daemons (container_runtime.h).
  ContainerRuntimeFacts runtime;

  std::vector<FactProblem> problems;

  // The value of a kernel argument ("iommu" → "pt"); "" for a bare flag; nullopt when absent.
  // The last occurrence wins, as for the kernel.
  std::optional<std::string> kernel_arg(const std::string& key) const;
  const PciFunctionFacts* pci_function(const PciAddress& address) const;
  // Whether kernel_release is MAJOR.MINOR or later ("6.1.0-18-amd64" >= 5.12); false when the
  // release is unknown or does not start with two numbers (each at most 6 digits).
  bool kernel_at_least(unsigned major, unsigned minor) const;
  bool module_loaded(const std::string& name) const;
};

// Reads every fact under `root` ("/" for the live host, a gathered tree otherwise). An empty
// root (an hwloc XML capture) gives empty facts.
TuningFacts read_tuning_facts(const std::string& root);

// Parses a kernel command line ("a=1 b \"c=d e\"") into key/value pairs, as the kernel does.
std::vector<std::pair<std::string, std::string>> parse_kernel_cmdline(const std::string& text);

// Finds the ACS capability in a PCI config space (4096 bytes when read as root) and returns its
// control register; nullopt when it has none or the extended space is not there.
std::optional<std::uint16_t> find_acs_control(const std::string& config_space);

}  // namespace polyaccel
