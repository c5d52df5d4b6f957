// The bytes an accelerator moved since the agent started, per direction (OpenTelemetry's
// hw.gpu.io, a monotonic counter): what the libraries give is either a counter of their own
// (NVLink's data counters, AMD's XGMI data per link) or a rate (NVIDIA GPM's PCIe rates, HLML's
// PCIe throughput). The monitor calls add_io for each new sample of a device with the one before
// it: a counter adds its increase (a counter that went back was reset, and adds what it counted
// since), a rate adds rate x the seconds between the two samples (none over a gap of more than
// 25 h: a clock step). The first sample starts the
// totals at 0; nothing wraps (the totals stop at 2^64 - 1).
#pragma once

#include <optional>

#include "core/accel_sample.h"

namespace polyaccel {

// Sets next.io_received_bytes and next.io_transmitted_bytes from `previous` (the device's last
// sample; nullopt for its first). A direction without a source in `next` keeps the previous
// total (absent when it never had one), so a sample of an unreachable device does not restart
// the count.
void add_io(const std::optional<AcceleratorSample>& previous, AcceleratorSample& next);

}  // namespace polyaccel
