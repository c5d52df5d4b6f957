// The guests libvirt runs on this host (Nova's, or anyone's), read as placements: their pinned
// vCPUs (<vcpupin>), emulator PUs (<emulatorpin>), guest NUMA cells bound to host nodes
// (<numatune> <memnode>/<memory>), hugepage backing per cell (<memoryBacking>) and passed-through
// PCI functions (<hostdev>). They count against the host like polyaccel's own placements, but
// polyaccel never writes or releases them (Placement::owner).
//
// The source is libvirt's status XML of each running domain, <domstatus> around the live
// <domain>, which libvirtd's QEMU driver keeps in /run/libvirt/qemu/<name>.xml from start to
// stop (and removes when the domain stops: a shut-off domain has no status file). Read through a
// root like every other source, so that a capture of a hypervisor reads the same; libvirt's API
// would need libvirt0 in the agent's image and has no root. docs/placement.md#running-guests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "place/placement.h"

namespace polyaccel::place {

// Placement::owner of a guest read from libvirt, and the prefix of its placement name
// ("libvirt:instance-0000002a").
inline constexpr const char* kLibvirtOwner = "libvirt";
inline constexpr const char* kLibvirtNamePrefix = "libvirt:";
// libvirt's status directory of the QEMU driver, under a root ("/" on the live host).
inline constexpr const char* kLibvirtStatusDir = "run/libvirt/qemu";
// More status files than this in the directory is not a hypervisor's (docs/limits.md).
inline constexpr size_t kMaxLibvirtDomains = 4096;

struct DomainReadOptions {
  // The page size of a <hugepages/> without <page>: libvirt's default is the host's default
  // huge page size (Hugepagesize in /proc/meminfo), 2 MiB on x86.
  std::uint64_t default_huge_page_bytes = std::uint64_t{2} << 20;
};

// One domain's XML: libvirt's status XML (<domstatus state=...>) or a live <domain> as
// `virsh dumpxml` prints it for a running guest. `input` names the file in errors. Hostile input
// is refused with an error naming `input`: every number, cpuset, size and PCI address is
// range-checked.
struct DomainPlacement {
  bool status_xml = false;  // the root was <domstatus> (else a bare <domain>)
  bool running = true;      // false for a <domstatus state='shutoff'>: it holds nothing
  Placement placement;      // name "libvirt:<domain name>", owner "libvirt"
};
Result<DomainPlacement> domain_placement(const std::string& input, const std::string& xml,
                                         const DomainReadOptions& options = {});

// Every running domain of a libvirt status directory (`dir`, usually <root>/run/libvirt/qemu):
// each regular *.xml file whose <domstatus> is not shut off, sorted by name. An absent directory
// is no domain (no libvirt on this host); one that cannot be read, or a status file that cannot
// be read or parsed, is an error naming it (polyaccel must not offer what it could not check).
Result<std::vector<Placement>> read_running_domains(const std::filesystem::path& dir,
                                                    const DomainReadOptions& options = {});

}  // namespace polyaccel::place
