#include "kube/runner.h"

#include <map>
#include <set>

#include "core/agent_parts.h"

namespace polyaccel {

namespace {

// The monitor's HostModel is made when it opens the backends; a GPU a backend lists only later
// (lost at start, then back: the monitor's rescan) is in the snapshot's devices with its
// inventory, but not in that model. Gives such GPUs their inventory; returns their bus ids.
std::set<std::string> complete_inventories(HostModel& model, const AcceleratorSnapshot& s) {
  std::set<std::string> filled;
  for (auto& a : model.accelerators) {
    if (a.inventory && !a.inventory->uuid.empty()) continue;
    const std::string bus = a.pci.address.to_string();
    const MonitoredDevice* d = s.device(bus);
    if (!d || !d->listed || d->inventory.uuid.empty()) continue;
    a.inventory = d->inventory;
    if (a.name.empty()) a.name = d->name;
    filled.insert(bus);
  }
  return filled;
}

}  // namespace

std::map<std::string, bool> DevicePluginRunner::health_of(const AcceleratorSnapshot& s) const {
  std::lock_guard<std::mutex> lock(withdrawn_mu_);
  std::map<std::string, bool> out;
  for (const auto& d : s.devices)
    out[d.pci_bus_id] = d.health.healthy && d.listed && !withdrawn_.count(d.pci_bus_id);
  return out;
}

void DevicePluginRunner::set_withdrawn(std::set<std::string> bus_ids) {
  {
    std::lock_guard<std::mutex> lock(withdrawn_mu_);
    withdrawn_ = std::move(bus_ids);
  }
  plugin_.set_health(health_of(*monitor_.snapshot()));
}

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
  HostModel model = model_with_current_mig(*snap);
  filled_ = complete_inventories(model, *snap);
  layouts_ = mig_layouts(*snap);
  Status st = plugin_.start(std::move(model));
  if (!st) return st;
  follower_ = std::thread([this, snap] {
    run_part("device-plugin-follower", [&] { follow(snap->generation, snap->host.get()); });
  });
  return Ok{};
}

void DevicePluginRunner::follow(std::uint64_t generation, const HostModel* host) {
  std::shared_ptr<const AcceleratorSnapshot> keep;  // keeps `host` alive between snapshots
  while (!stopping_) {
    auto snap = monitor_.wait_newer(generation, std::chrono::milliseconds(200));
    if (snap->generation == generation || !snap->ready) continue;
    generation = snap->generation;
    // A new HostModel is published only when the device set changed; a GPU listed again after
    // it was lost at start, or a MIG layout changed since (the monitor's rescans, as the DRA
    // driver follows them), changes the plan too.
    HostModel model = model_with_current_mig(*snap);
    auto filled = complete_inventories(model, *snap);
    auto layouts = mig_layouts(*snap);
    if (snap->host.get() != host || filled != filled_ || layouts != layouts_) {
      plugin_.set_model(std::move(model));
      host = snap->host.get();
      filled_ = std::move(filled);
      layouts_ = std::move(layouts);
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
