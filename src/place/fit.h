// The fit: HostView + allocations + request -> a placement, or the reason there is none. Pure:
// no I/O, the same inputs give the same answer.
//
// It keeps Nova's rules (../shared/reference/nova-placement.md): where Nova fits, a fit exists
// under the same rules; where Nova refuses, so does this. Where Nova leaves a choice open it
// chooses better (Strategy::polyaccel): devices local and under one PCIe switch, no GPU node
// taken by a guest that does not use its GPU, partly used cores and nodes filled before whole
// ones are broken, best fit on what is left. Strategy::first_fit is Nova's own choice (its cell
// order, the first permutation that fits, cores and devices in host order): the baseline.
#pragma once

#include <string>
#include <vector>

#include "place/host_view.h"
#include "place/placement.h"
#include "place/request.h"

namespace polyaccel::place {

enum class Strategy { polyaccel, first_fit };

struct FitResult {
  bool fit = false;
  std::string reason;   // when it does not fit: which cell (or device request) lacked what
  Placement placement;  // when it fits; the name is left empty
  // When it does not fit for want of huge pages on some host NUMA node (hw:mem_page_size large,
  // any or a size): the CLI then names its what-if options.
  bool short_of_pages = false;
};

// An error only when the allocations do not belong to this host (see usage_of).
Result<FitResult> fit(const HostView& host, const std::vector<Placement>& allocations,
                      const Request& request, Strategy strategy = Strategy::polyaccel);

// Same, with the usage already computed (the fleet simulation and benchmarks reuse it).
FitResult fit(const HostView& host, const HostUsage& usage, const Request& request,
              Strategy strategy = Strategy::polyaccel);

}  // namespace polyaccel::place
