// The guest side of an NCCL topology file: which host functions a guest got and where it sees
// them, from a committed placement (guest NUMA cells, their vCPUs, the devices' cells) and the
// guest's libvirt domain XML (each <hostdev>'s host source address and guest address).
#pragma once

#include <string>

#include "core/error.h"
#include "place/placement.h"
#include "render/nccl.h"

namespace polyaccel::render {

// Guest bus numbers are the ones the guest firmware assigns: a pcie-expander-bus keeps its
// busNr and numbers the buses below it from busNr+1; every other bridge (root port, switch
// port, PCI bridge) takes the next number depth-first in slot order below its parent, starting
// at 1 on pcie-root. `xml_name` names the input in errors.
Result<NcclGuestView> nccl_guest_view(const place::Placement& placement,
                                      const std::string& xml_name, const std::string& xml_text);

}  // namespace polyaccel::render
