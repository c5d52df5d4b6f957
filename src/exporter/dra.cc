// The DRA driver's state (src/dra, through core/dra_status.h): what the API server keeps of the
// gated ResourceSlice fields, and how the pool's slices are kept published. Nothing without
// `--dra`.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class DraCollector : public Collector {
 public:
  std::string name() const override { return "dra"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    if (!in.dra) return Ok{};
    const DraStatus& s = *in.dra;
    auto counters = family("polyaccel_dra_server_keeps_counters",
                           "1 when the API server keeps ResourceSlice counters "
                           "(DRAPartitionableDevices on) and MIG placements are published; 0: "
                           "only whole GPUs and existing MIG instances are.",
                           MetricType::Gauge);
    auto taints = family("polyaccel_dra_server_keeps_taints",
                         "1 when the API server keeps device taints (DRADeviceTaints on); 0: "
                         "unhealthy devices are withdrawn instead of tainted.",
                         MetricType::Gauge);
    auto devices = family("polyaccel_dra_published_devices",
                          "Devices in the node's published ResourceSlice pool.", MetricType::Gauge);
    auto watching =
        family("polyaccel_dra_slices_watch_up",
               "1 while a watch on the pool's ResourceSlices is open.", MetricType::Gauge);
    auto syncs = family("polyaccel_dra_slice_syncs_total",
                        "Successful syncs of the pool's ResourceSlices with the API server.",
                        MetricType::Counter);
    auto errors = family("polyaccel_dra_slice_sync_errors_total",
                         "Failed syncs of the pool's ResourceSlices.", MetricType::Counter);
    auto writes =
        family("polyaccel_dra_api_writes_total",
               "ResourceSlice creates, updates and deletes the syncs made.", MetricType::Counter);
    auto restores = family("polyaccel_dra_slices_restored_total",
                           "Syncs that put back slices someone else deleted (the kubelet's wipe "
                           "at its start).",
                           MetricType::Counter);
    if (s.server_fields_known) {
      add_sample(counters, {}, s.server_keeps_counters ? 1 : 0);
      add_sample(taints, {}, s.server_keeps_taints ? 1 : 0);
    }
    add_sample(devices, {}, static_cast<double>(s.devices));
    add_sample(watching, {}, s.watching ? 1 : 0);
    add_sample(syncs, {}, static_cast<double>(s.syncs));
    add_sample(errors, {}, static_cast<double>(s.sync_errors));
    add_sample(writes, {}, static_cast<double>(s.api_writes));
    add_sample(restores, {}, static_cast<double>(s.restores));
    emit(out, {&counters, &taints, &devices, &watching, &syncs, &errors, &writes, &restores});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_dra_collector() {
  return std::make_unique<DraCollector>();
}

}  // namespace polyaccel::exporter
