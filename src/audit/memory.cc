// memory.swap: a hypervisor whose guests are pinned must not page their memory out.
#include "audit/checks.h"
#include "core/byte_size.h"
#include "core/strings.h"

namespace polyaccel::audit {

Findings check_memory(const AuditContext& c) {
  Findings out;
  const TuningFacts& f = c.facts;
  if (!c.hypervisor || !f.swap_total_bytes || *f.swap_total_bytes == 0) return out;
  Finding fd;
  fd.id = "memory.swap";
  fd.severity = Severity::warning;
  fd.subject = "host";
  fd.observed = format_byte_size(*f.swap_total_bytes) + " of swap active" +
                (f.swap_devices.empty() ? "" : " (" + join(f.swap_devices, ", ") + ")");
  fd.expected = "no swap on a hypervisor with pinned guests";
  fd.remedy.summary =
      "a guest page swapped out stalls its vCPU and breaks the NUMA placement: turn swap off "
      "and remove it from /etc/fstab";
  fd.remedy.commands = {"swapoff -a", "sed -i '/\\sswap\\s/s/^/#/' /etc/fstab"};
  out.push_back(std::move(fd));
  return out;
}

}  // namespace polyaccel::audit
