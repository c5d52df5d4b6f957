// gpudirect.peer-memory, gpudirect.nic-distance.
#include <algorithm>

#include "audit/checks.h"

namespace polyaccel::audit {

namespace {

bool any_rdma_nic(const HostModel& m) {
  return std::any_of(m.nics.begin(), m.nics.end(), [](const Nic& n) { return n.rdma_capable(); });
}

void check_peer_memory(const AuditContext& c, Findings& out) {
  const TuningFacts& f = c.facts;
  if (!f.modules_known || c.model.accelerators_of(Vendor::nvidia).empty() ||
      !any_rdma_nic(c.model)) {
    return;
  }
  // Either route lets the NIC read and write GPU memory (../shared/reference/amd-gaudi-sriov.md
  // 4.3): the peer-memory module, or DMA-BUF with the open kernel modules on Linux 5.12+.
  if (f.module_loaded("nvidia_peermem") || f.module_loaded("nv_peer_mem")) return;
  bool open_modules = f.nvidia_driver_text.find("Open Kernel Module") != std::string::npos;
  bool dmabuf_kernel = f.kernel_at_least(5, 12);
  if (open_modules && dmabuf_kernel) return;
  Finding fd;
  fd.id = "gpudirect.peer-memory";
  fd.severity = Severity::warning;
  fd.subject = "kernel";
  std::string driver = f.nvidia_driver_text.empty() ? "NVIDIA driver not loaded"
                       : open_modules               ? "NVIDIA open kernel modules"
                                                    : "NVIDIA proprietary kernel modules";
  fd.observed = "nvidia_peermem not loaded; " + driver + ", kernel " +
                (f.kernel_release.empty() ? "unknown" : f.kernel_release);
  fd.expected = "nvidia_peermem loaded, or DMA-BUF (open kernel modules on Linux 5.12 or later)";
  fd.remedy.summary =
      "without a peer-memory route NCCL stages RDMA through host memory: load nvidia_peermem "
      "(and at boot), or move to the open kernel modules on a 5.12+ kernel for DMA-BUF";
  fd.remedy.modules_load.push_back("nvidia_peermem");
  fd.remedy.commands.push_back("modprobe nvidia_peermem");
  out.push_back(std::move(fd));
}

void check_nic_distance(const AuditContext& c, Findings& out) {
  const HostModel& m = c.model;
  if (!any_rdma_nic(m)) return;
  for (const auto& a : m.accelerators) {
    if (a.closest_nics.empty() || c.is_passthrough(a.pci.address)) continue;
    auto ia = m.links.index_of(a.id);
    auto in = m.links.index_of(a.closest_nics.front());
    if (!ia || !in) continue;
    const Link& link = m.links.at(*ia, *in);
    if (link.level <= LinkLevel::pxb) continue;
    std::string names;
    for (const auto& id : a.closest_nics) {
      const Nic* n = m.nic(id);
      std::string dev = n && !n->rdma_devices.empty() ? " (" + n->rdma_devices.front() + ")" : "";
      names += (names.empty() ? "" : ", ") + id + dev;
    }
    Finding f;
    f.id = "gpudirect.nic-distance";
    // Through the CPU's root complex (PHB) is often the best a chassis offers (APUs, GPUs on
    // their own root port); across host bridges or sockets is a placement to fix.
    f.severity = link.level == LinkLevel::phb ? Severity::info : Severity::warning;
    f.subject = c.device_name(a.pci.address);
    f.observed = "closest RDMA NIC " + names + " at " + link.label();
    f.expected = "an RDMA NIC at PIX or PXB (behind the same PCIe switch)";
    f.remedy.summary =
        "NCCL uses GPUDirect RDMA only up to PXB (NCCL_NET_GDR_LEVEL): traffic of this GPU is "
        "staged through host memory. Put an RDMA NIC under the GPU's PCIe switch, or accept the "
        "staging and give this GPU's ranks the NIC on its NUMA node";
    out.push_back(std::move(f));
  }
}

}  // namespace

Findings check_gpudirect(const AuditContext& c) {
  Findings out;
  check_peer_memory(c, out);
  check_nic_distance(c, out);
  return out;
}

}  // namespace polyaccel::audit
