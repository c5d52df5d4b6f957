// The accelerators under OpenTelemetry's hardware semantic conventions (semconv hardware/gpu.md
// and hardware/common.md): hw.gpu.utilization, hw.gpu.memory.{usage,limit,utilization},
// hw.gpu.io, hw.errors, hw.status, hw.power, hw.energy and hw.temperature, each with the
// instrument and unit the conventions give it, and the attributes hw.id, hw.type="gpu",
// hw.vendor, hw.model, hw.name (and hw.parent on a MIG instance: its GPU's hw.id). A temperature
// sensor is a component of its own: hw.type="temperature", its GPU as hw.parent. A device held
// by pods (device plugin or DRA claim) has its points once per pod, with k8s.namespace.name,
// k8s.pod.name and k8s.container.name. Plain values: the OTLP push (otlp.h) encodes them.
// docs/exporter.md has the table of names beside DCGM's and AMD's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/pod_assignments.h"
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

// The accelerators (NVIDIA, AMD, Gaudi) of `snapshot` that have a sample, and their MIG
// instances, with the pods of `pods` that hold them (DRA claims joined: with_claim_devices). A
// metric without any point is left out.
std::vector<HwMetric> hw_metrics(const AcceleratorSnapshot& snapshot, const PodAssignments& pods);

// The hw.id of a GPU: its UUID, else its PCI bus id.
std::string hw_id(const MonitoredDevice& device);

}  // namespace polyaccel::exporter
