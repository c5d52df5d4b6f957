// The accelerators under OpenTelemetry's hardware semantic conventions (semconv hardware/gpu.md
// and hardware/common.md): hw.gpu.utilization, hw.gpu.memory.{usage,limit,utilization},
// hw.errors, hw.status, hw.power, hw.energy and hw.temperature, each with the instrument and
// unit the conventions give it, and the attributes hw.id, hw.type="gpu", hw.vendor, hw.model,
// hw.name (and hw.parent on a MIG instance: its GPU's hw.id). Plain values: the OTLP push
// (otlp.h) encodes them. docs/exporter.md has the table of names beside DCGM's and AMD's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "discover/accel/monitor.h"

namespace polyaccel::exporter {

// OpenTelemetry's instruments: a counter is a monotonic sum, an up-down counter a sum that may
// fall, a gauge a value as of now.
enum class HwInstrument { gauge, counter, up_down_counter };

using HwAttributes = std::vector<std::pair<std::string, std::string>>;

struct HwPoint {
  HwAttributes attributes;
  double value = 0;
};

struct HwMetric {
  std::string name;  // "hw.gpu.utilization"
  std::string description;
  std::string unit;  // UCUM, as the conventions write it: "1", "By", "W", "J", "Cel", "{error}"
  HwInstrument instrument = HwInstrument::gauge;
  std::vector<HwPoint> points;
};

// The GPUs (NVIDIA, AMD) of `snapshot` that have a sample, and their MIG instances. A metric
// without any point is left out.
std::vector<HwMetric> hw_metrics(const AcceleratorSnapshot& snapshot);

// The hw.id of a GPU: its UUID, else its PCI bus id.
std::string hw_id(const MonitoredDevice& device);

}  // namespace polyaccel::exporter
