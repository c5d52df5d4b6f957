// numa.balancing, numa.pci-locality-unknown.
#include "audit/checks.h"
#include "audit/support.h"

namespace polyaccel::audit {

namespace {

size_t nodes_with_cpus(const HostModel& m) {
  size_t n = 0;
  for (const auto& node : m.numa_nodes)
    n += !node.cpus.empty();
  return n;
}

void check_locality(const AuditContext& c, const PciDevice& pci, Findings& out) {
  const PciFunctionFacts* p = c.facts.pci_function(pci.address);
  bool unknown = p && p->numa_node ? *p->numa_node < 0 : pci.numa_nodes.empty();
  if (!unknown) return;
  Finding f;
  f.id = "numa.pci-locality-unknown";
  f.severity = Severity::warning;
  f.subject = c.device_name(pci.address);
  f.observed = p && p->numa_node ? "numa_node is " + std::to_string(*p->numa_node)
                                 : "no NUMA locality in the topology";
  f.expected = "the NUMA node the device is attached to";
  f.remedy.summary =
      "the firmware gives no proximity for this device (ACPI _PXM/SRAT): update the BIOS or "
      "enable its NUMA/PCIe locality option; until then the kernel, NCCL and the placement "
      "cannot keep its work local";
  if (pci.numa_nodes.size() == 1) {
    f.remedy.summary += "; hwloc places it on node " + std::to_string(pci.numa_nodes[0]);
    f.remedy.commands.push_back("echo " + std::to_string(pci.numa_nodes[0]) +
                                " > /sys/bus/pci/devices/" + pci.address.to_string() +
                                "/numa_node  # taints the kernel (firmware bug workaround)");
  }
  out.push_back(std::move(f));
}

}  // namespace

Findings check_numa(const AuditContext& c) {
  Findings out;
  if (nodes_with_cpus(c.model) < 2) return out;  // one node: nothing to balance or misplace

  if (c.facts.numa_balancing && *c.facts.numa_balancing != 0 &&
      (c.hypervisor || !c.pinned.empty())) {
    Finding f;
    f.id = "numa.balancing";
    f.severity = Severity::warning;
    f.subject = "kernel";
    f.observed = "kernel.numa_balancing = " + std::to_string(*c.facts.numa_balancing);
    f.expected = "kernel.numa_balancing = 0 where memory is placed by pinning";
    f.remedy.summary =
        "automatic NUMA balancing unmaps pages to sample accesses and migrates memory that "
        "pinning already placed: turn it off";
    f.remedy.sysctls.push_back("kernel.numa_balancing = 0");
    f.remedy.runtime.push_back({"proc/sys/kernel/numa_balancing", "0"});
    out.push_back(std::move(f));
  }

  for (const auto& a : c.model.accelerators)
    check_locality(c, a.pci, out);
  for (const auto& n : c.model.nics)
    check_locality(c, n.pci, out);
  return out;
}

}  // namespace polyaccel::audit
