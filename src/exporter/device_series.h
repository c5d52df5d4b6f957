// The series one accelerator gets: one per pod holding it, or one without pod labels; for a GPU
// in MIG mode, also one per MIG instance (times the pods holding that instance). A time-sliced
// device shared by three pods thus gets three series with the same device values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/dra_status.h"
#include "core/pod_assignments.h"
#include "discover/accel/monitor.h"
#include "exporter/families.h"

namespace polyaccel::exporter {

struct DeviceSeries {
  const MonitoredDevice* device = nullptr;
  const MigInstance* mig = nullptr;  // set for a MIG instance's series
  std::optional<PodRef> pod;
};

std::vector<DeviceSeries> device_series(const MonitoredDevice& device, const PodAssignments& pods,
                                        bool with_mig_instances);

// The pods holding the whole `device`, named by any id a device plugin gives it (its UUID, bus
// id or our id), each once.
std::vector<PodRef> device_pods(const MonitoredDevice& device, const PodAssignments& pods);

// `pods` with the devices of DRA claims joined in: each claim device of the DRA driver's own
// pool (by_claim_device) counts as held on the ids the driver knows it by (dra.device_ids), so
// a GPU or MIG instance allocated through a claim gets its pod's labels as one a device plugin
// allocated does.
PodAssignments with_claim_devices(const PodAssignments& pods, const DraStatus& dra);

// pod, namespace, container: only when the series has a pod.
Labels pod_labels(const DeviceSeries& series);

// Bus id as NVML and DCGM print it: "00000000:4E:00.0".
std::string nvml_bus_id(const std::string& pci_bus_id);

}  // namespace polyaccel::exporter
