#include "discover/accel/monitor.h"

#include <algorithm>

#include "core/agent_parts.h"

#include "discover/accel/backends.h"
#include "discover/accel/io_totals.h"

namespace polyaccel {
namespace {

// Events are polled in slices this long at most, so that stop() is seen soon.
constexpr std::chrono::milliseconds kPollSlice{200};

// What a device plugin lists of a device: its MIG instances. A change is a device-set change.
std::string mig_layout(const AcceleratorInventory& inv) {
  std::string key = inv.mig_enabled.value_or(false) ? "on" : "off";
  for (const auto& m : inv.mig_instances) {
    key += "|" + m.uuid + ":" + std::to_string(m.gpu_instance_id) + "/" +
           std::to_string(m.compute_instance_id) + ":" + m.profile_name;
  }
  return key;
}

}  // namespace

const MonitoredDevice* AcceleratorSnapshot::device(const std::string& id_or_bus_id) const {
  for (const auto& d : devices) {
    if (d.id == id_or_bus_id || d.pci_bus_id == id_or_bus_id) return &d;
  }
  return nullptr;
}

HostModel model_with_current_mig(const AcceleratorSnapshot& s) {
  HostModel m = *s.host;
  for (auto& a : m.accelerators) {
    if (!a.inventory) continue;
    const MonitoredDevice* d = s.device(a.pci.address.to_string());
    if (!d || !d->listed) continue;
    a.inventory->mig_enabled = d->inventory.mig_enabled;
    a.inventory->mig_instances = d->inventory.mig_instances;
  }
  return m;
}

std::string mig_layouts(const AcceleratorSnapshot& s) {
  std::string key;
  for (const auto& d : s.devices) {
    if (!d.listed) continue;
    key += d.pci_bus_id + (d.inventory.mig_enabled.value_or(false) ? "+" : "-");
    for (const auto& i : d.inventory.mig_instances)
      key += std::to_string(i.gpu_instance_id) + "/" + std::to_string(i.compute_instance_id) + "/" +
             std::to_string(i.profile_id) + "@" + std::to_string(i.placement_start) + i.uuid + ",";
    key += ";";
  }
  return key;
}

AcceleratorMonitor::AcceleratorMonitor(HostModel host,
                                       std::vector<std::unique_ptr<AcceleratorBackend>> backends,
                                       MonitorOptions options)
    : options_(std::move(options)),
      backends_(std::move(backends)),
      host_(std::move(host)),
      tracker_(options_.health) {
  auto first = std::make_shared<AcceleratorSnapshot>();
  host_snapshot_ = std::make_shared<const HostModel>(host_);
  first->host = host_snapshot_;
  snapshot_ = std::move(first);
}

AcceleratorMonitor::~AcceleratorMonitor() {
  stop();
}

void AcceleratorMonitor::start() {
  std::lock_guard lock(state_mu_);
  if (startup_.joinable() || stop_) return;
  startup_ = std::thread([this] { run_part("monitor-startup", [this] { run_startup(); }); });
}

void AcceleratorMonitor::stop() {
  {
    std::lock_guard lock(state_mu_);
    stop_ = true;
  }
  rescan_cv_.notify_all();
  if (startup_.joinable()) startup_.join();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
}

bool AcceleratorMonitor::stopping() const {
  std::lock_guard lock(state_mu_);
  return stop_;
}

bool AcceleratorMonitor::rescan_asked(size_t backend_index) const {
  std::lock_guard lock(state_mu_);
  return rescans_asked_ > rescans_done_[backend_index];
}

bool AcceleratorMonitor::rescan_now(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(state_mu_);
  if (!ready_) return false;
  const std::uint64_t asked = ++rescans_asked_;
  return rescan_cv_.wait_for(lock, timeout, [&] {
    if (stop_) return true;
    for (size_t i = 0; i < backends_.size(); ++i) {
      if (statuses_[i].present && rescans_done_[i] < asked) return false;
    }
    return true;
  }) && !stop_;
}

std::shared_ptr<const AcceleratorSnapshot> AcceleratorMonitor::snapshot() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

std::shared_ptr<const AcceleratorSnapshot> AcceleratorMonitor::wait_newer(
    std::uint64_t generation, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(snapshot_mu_);
  snapshot_cv_.wait_for(lock, timeout, [&] { return snapshot_->generation > generation; });
  return snapshot_;
}

int AcceleratorMonitor::subscribe(Listener listener) {
  std::lock_guard lock(listeners_mu_);
  int id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void AcceleratorMonitor::unsubscribe(int id) {
  std::lock_guard lock(listeners_mu_);
  listeners_.erase(id);
}

void AcceleratorMonitor::run_startup() {
  // Opening and listing are vendor calls: done on a copy of the model, outside the lock.
  HostModel merged;
  {
    std::lock_guard lock(state_mu_);
    merged = host_;
  }
  std::vector<AcceleratorBackendStatus> statuses = merge_accelerators(merged, backends_);
  std::vector<MonitoredDevice> devices;
  for (const auto& a : merged.accelerators) {
    if (!a.inventory) continue;  // hwloc saw it but no library answers for it
    MonitoredDevice d;
    d.id = a.id;
    d.pci_bus_id = a.pci.address.to_string();
    d.vendor = a.vendor;
    d.backend = a.inventory->backend;
    d.name = a.name;
    d.inventory = *a.inventory;
    devices.push_back(std::move(d));
  }
  merged.accelerator_backends = statuses;
  {
    std::lock_guard lock(state_mu_);
    if (stop_) return;
    host_ = std::move(merged);
    host_snapshot_ = std::make_shared<const HostModel>(host_);
    statuses_ = std::move(statuses);
    devices_ = std::move(devices);
    rescans_done_.assign(backends_.size(), 0);
    ready_ = true;
  }
  publish(true);
  std::lock_guard lock(state_mu_);
  if (stop_) return;
  for (size_t i = 0; i < backends_.size(); ++i) {
    if (statuses_[i].present)
      workers_.emplace_back(
          [this, i] { run_part("monitor-" + backends_[i]->name(), [this, i] { run_worker(i); }); });
  }
}

void AcceleratorMonitor::run_worker(size_t backend_index) {
  using Clock = std::chrono::steady_clock;
  auto next_rescan = Clock::now() + options_.rescan;
  // Subscribes to the devices' events before the first sample, so that none is missed.
  record_events(backends_[backend_index]->poll_events(std::chrono::milliseconds(0)));
  while (!stopping()) {
    auto deadline = Clock::now() + options_.interval;
    sample_pass(backend_index);
    if (stopping()) break;
    std::uint64_t asked;
    {
      std::lock_guard lock(state_mu_);
      asked = rescans_asked_;
    }
    if (Clock::now() >= next_rescan || asked > rescans_done_[backend_index]) {
      rescan(backend_index);  // publishes before the waiter of rescan_now is told
      next_rescan = Clock::now() + options_.rescan;
      {
        std::lock_guard lock(state_mu_);
        rescans_done_[backend_index] = asked;
      }
      rescan_cv_.notify_all();
    }
    poll_until(backend_index, deadline);
  }
}

void AcceleratorMonitor::sample_pass(size_t backend_index) {
  AcceleratorBackend& backend = *backends_[backend_index];
  std::vector<std::string> buses;
  {
    std::lock_guard lock(state_mu_);
    for (const auto& d : devices_) {
      if (d.backend == backend.name()) buses.push_back(d.pci_bus_id);
    }
  }
  std::vector<AcceleratorSample> samples;
  samples.reserve(buses.size());
  for (const auto& bus : buses) {
    samples.push_back(backend.sample(bus));
    samples.back().pci_bus_id = bus;  // as the monitor knows it, whatever the library spells
  }
  {
    std::lock_guard lock(state_mu_);
    for (auto& s : samples) {
      tracker_.observe(s);
      auto it = std::find_if(devices_.begin(), devices_.end(), [&](const MonitoredDevice& d) {
        return d.pci_bus_id == s.pci_bus_id;
      });
      if (it == devices_.end()) continue;
      add_io(it->sample, s);  // hw.gpu.io's totals, from every sample (io_totals.h)
      it->sample = std::move(s);
    }
  }
  publish(false);
}

void AcceleratorMonitor::poll_until(size_t backend_index,
                                    std::chrono::steady_clock::time_point deadline) {
  AcceleratorBackend& backend = *backends_[backend_index];
  while (!stopping()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || rescan_asked(backend_index)) return;
    record_events(backend.poll_events(std::min(left, kPollSlice)));
  }
}

void AcceleratorMonitor::record_events(const std::vector<AcceleratorEvent>& events) {
  if (events.empty()) return;
  {
    std::lock_guard lock(state_mu_);
    for (const auto& e : events) {
      tracker_.observe(e);
      for (auto& d : devices_) {
        if (d.pci_bus_id != e.pci_bus_id) continue;
        ++d.events[static_cast<size_t>(e.kind)];
        if (e.kind == AcceleratorEventKind::xid) {
          ++d.xid_count[e.code];
          d.last_xid = e.code;
        }
      }
    }
  }
  publish(false);  // at once: a fatal XID must reach the device plugin before the next sample
}

void AcceleratorMonitor::rescan(size_t backend_index) {
  AcceleratorBackend& backend = *backends_[backend_index];
  auto listed = backend.devices();
  if (!listed) return;  // the samples already tell what no longer answers
  bool changed = false;
  {
    std::lock_guard lock(state_mu_);
    for (auto& d : devices_) {
      if (d.backend == backend.name()) d.listed = false;
    }
    for (auto& dev : *listed) {
      auto addr = PciAddress::parse(dev.pci_bus_id);
      std::string bus = addr ? addr->to_string() : dev.pci_bus_id;
      auto it = std::find_if(devices_.begin(), devices_.end(),
                             [&](const MonitoredDevice& d) { return d.pci_bus_id == bus; });
      if (it == devices_.end()) {
        // Hot-plugged: it keeps the next free id, so the ids of the others do not move.
        MonitoredDevice d;
        d.id = "gpu" + std::to_string(devices_.size());
        d.pci_bus_id = bus;
        d.vendor = backend.vendor();
        d.backend = backend.name();
        d.name = dev.inventory.product_name;
        devices_.push_back(std::move(d));
        it = devices_.end() - 1;
        changed = true;
      } else if (mig_layout(it->inventory) != mig_layout(dev.inventory)) {
        changed = true;
      }
      it->inventory = std::move(dev.inventory);
      it->listed = true;
    }
    std::sort(devices_.begin(), devices_.end(),
              [](const MonitoredDevice& a, const MonitoredDevice& b) {
                return a.pci_bus_id < b.pci_bus_id;
              });
  }
  publish(changed);
}

void AcceleratorMonitor::publish(bool device_set_changed) {
  // One publication at a time, and the listeners see it before any reader of snapshot() does:
  // what a listener writes from a new device set (the node's CDI specs) is on disk before the
  // device plugin, which follows snapshot(), can list those devices.
  std::lock_guard order(publish_mu_);
  auto next = std::make_shared<AcceleratorSnapshot>();
  MonitorChange change;
  change.device_set = device_set_changed;
  {
    std::lock_guard lock(state_mu_);
    auto now = std::chrono::system_clock::now();
    for (auto& d : devices_)
      d.health = tracker_.health(d.pci_bus_id, now);
    next->generation = ++generation_;
    next->published = now;
    next->ready = ready_;
    next->host = host_snapshot_;
    next->backends = statuses_;
    next->devices = devices_;
  }
  {
    std::lock_guard lock(snapshot_mu_);
    for (const auto& d : next->devices) {
      const MonitoredDevice* before = snapshot_->device(d.pci_bus_id);
      if (before && before->health.healthy != d.health.healthy) {
        change.health_changed.push_back(d.pci_bus_id);
      }
    }
  }
  if (change.device_set || !change.health_changed.empty()) {
    std::vector<Listener> listeners;
    {
      std::lock_guard lock(listeners_mu_);
      for (const auto& [id, l] : listeners_)
        listeners.push_back(l);
    }
    // A listener that throws is a part that failed, not the monitor's end.
    for (const auto& l : listeners)
      run_part("monitor-listener", [&] { l(*next, change); });
  }
  {
    std::lock_guard lock(snapshot_mu_);
    snapshot_ = next;
  }
  snapshot_cv_.notify_all();
}

}  // namespace polyaccel
