// The state of the link to kubelet's pod-resources API, which gives the pod labels.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class KubeletCollector : public Collector {
 public:
  std::string name() const override { return "kubelet"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    auto up =
        family("polyaccel_pod_resources_up",
               "1 when kubelet's pod-resources API answered the last List.", MetricType::Gauge);
    auto devices = family("polyaccel_pod_resources_devices",
                          "Device ids kubelet reports as held by a container.", MetricType::Gauge);
    add_sample(up, {}, in.pods->reachable ? 1 : 0);
    if (in.pods->reachable) add_sample(devices, {}, static_cast<double>(in.pods->by_device.size()));
    emit(out, {&up, &devices});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_kubelet_collector() {
  return std::make_unique<KubeletCollector>();
}

}  // namespace polyaccel::exporter
