#include "kube/runner.h"

#include <map>

namespace polyaccel {

namespace {

std::map<std::string, bool> health_of(const AcceleratorSnapshot& s) {
  std::map<std::string, bool> out;
  for (const auto& d : s.devices)
    out[d.pci_bus_id] = d.health.healthy && d.listed;
  return out;
}

}  // namespace

DevicePluginRunner::DevicePluginRunner(const AcceleratorMonitor& monitor,
                                       DevicePluginOptions options)
    : monitor_(monitor), plugin_(std::move(options)) {}

DevicePluginRunner::~DevicePluginRunner() {
  stop();
}

Status DevicePluginRunner::start(std::chrono::milliseconds ready_timeout) {
  auto deadline = std::chrono::steady_clock::now() + ready_timeout;
  auto snap = monitor_.snapshot();
  while (!snap->ready && std::chrono::steady_clock::now() < deadline) {
    snap = monitor_.wait_newer(snap->generation, std::chrono::milliseconds(200));
  }
  if (!snap->ready) {
    return Error{ErrorCode::internal,
                 "accelerator monitor",
                 "did not finish opening the vendor libraries in time",
                 {}};
  }
  plugin_.set_health(health_of(*snap));
  Status st = plugin_.start(*snap->host);
  if (!st) return st;
  follower_ = std::thread([this, snap] { follow(snap->generation, snap->host.get()); });
  return Ok{};
}

void DevicePluginRunner::follow(std::uint64_t generation, const HostModel* host) {
  std::shared_ptr<const AcceleratorSnapshot> keep;  // keeps `host` alive between snapshots
  while (!stopping_) {
    auto snap = monitor_.wait_newer(generation, std::chrono::milliseconds(200));
    if (snap->generation == generation || !snap->ready) continue;
    generation = snap->generation;
    // A new HostModel is published only when the device set changed.
    if (snap->host.get() != host) {
      plugin_.set_model(*snap->host);
      host = snap->host.get();
    }
    plugin_.set_health(health_of(*snap));
    keep = snap;
  }
}

void DevicePluginRunner::stop() {
  stopping_ = true;
  if (follower_.joinable()) follower_.join();
  plugin_.stop();
}

}  // namespace polyaccel
