// AcceleratorMonitor: the agent's background view of its accelerators. It owns the vendor
// backends, opens them and merges what they know into the HostModel (as discover does), then
// samples each backend on its own thread every interval, polls events between samples, feeds the
// HealthTracker, and publishes an immutable snapshot.
//
// Readers (the exporter's scrape, the device plugin's Allocate) only copy a shared_ptr under a
// short lock: they never wait on a vendor call. A call that hangs only makes the snapshot old,
// which shows in each device's sample time. One backend per thread, so a hung NVML does not stop
// the AMD or Gaudi samples on the same host.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/host_model.h"
#include "discover/accel/backend.h"
#include "discover/accel/health.h"

namespace polyaccel {

struct MonitorOptions {
  std::chrono::milliseconds interval{10000};  // between two samples of a device
  // How often each backend lists its devices again: a hot-plugged GPU, a new MIG layout.
  std::chrono::milliseconds rescan{60000};
  HealthPolicy health;
};

// One accelerator as the monitor last saw it.
struct MonitoredDevice {
  std::string id;          // the HostModel's id: "gpu0", ...
  std::string pci_bus_id;  // "0000:4e:00.0"
  Vendor vendor = Vendor::other;
  std::string backend;                      // "nvml", "rocm-smi", "hlml"
  std::string name;                         // "NVIDIA H100 80GB HBM3"
  AcceleratorInventory inventory;           // MIG instances are inventory.mig_instances
  std::optional<AcceleratorSample> sample;  // the last one; absent before the first
  DeviceHealth health;
  // Events since the monitor started, by kind (indexed by AcceleratorEventKind).
  std::array<std::uint64_t, 4> events{};
  std::map<std::uint64_t, std::uint64_t> xid_count;  // XID number → times seen
  std::optional<std::uint64_t> last_xid;
  bool listed = true;  // the library listed it at its last enumeration (false: fell off the bus)

  std::uint64_t event_count(AcceleratorEventKind kind) const {
    return events[static_cast<size_t>(kind)];
  }
};

struct AcceleratorSnapshot {
  std::uint64_t generation = 0;  // 0: nothing sampled yet; grows with every publication
  std::chrono::system_clock::time_point published{};
  bool ready = false;                     // the backends were opened and merged
  std::shared_ptr<const HostModel> host;  // with the accelerators merged in; never null
  std::vector<AcceleratorBackendStatus> backends;
  std::vector<MonitoredDevice> devices;  // PCI order

  const MonitoredDevice* device(const std::string& id_or_bus_id) const;
};

// The monitor's HostModel is made once, when it opens the backends; its rescans update only the
// snapshot's devices. A MIG layout changed since (`polyaccel mig apply`, nvidia-smi, a DRA claim's
// dynamic instance) is taken from there: the snapshot's model with each listed device's current
// MIG mode and instances. The DRA driver and the device plugin both plan from it.
HostModel model_with_current_mig(const AcceleratorSnapshot& s);

// The snapshot's MIG layouts (mode, instances and their placements, per listed device) as one
// key: when it differs from the last one seen, the layout changed and a plan must be made again.
std::string mig_layouts(const AcceleratorSnapshot& s);

// What changed between two publications; given to listeners.
struct MonitorChange {
  bool device_set = false;                  // a device appeared, or a MIG layout changed
  std::vector<std::string> health_changed;  // bus ids whose health flipped
};

class AcceleratorMonitor {
 public:
  using Listener = std::function<void(const AcceleratorSnapshot&, const MonitorChange&)>;

  // `host` comes from discover_host with the backends off; the monitor merges its own backends.
  AcceleratorMonitor(HostModel host, std::vector<std::unique_ptr<AcceleratorBackend>> backends,
                     MonitorOptions options);
  ~AcceleratorMonitor();  // stop()
  AcceleratorMonitor(const AcceleratorMonitor&) = delete;
  AcceleratorMonitor& operator=(const AcceleratorMonitor&) = delete;

  // Starts the threads and returns at once. The backends are opened and merged on a thread of
  // their own: the first snapshot with ready = true follows, then one per sample pass.
  void start();
  // Stops and joins the threads. A vendor call that never returns keeps this waiting.
  void stop();

  std::shared_ptr<const AcceleratorSnapshot> snapshot() const;

  // Waits until a snapshot newer than `generation` is published, or `timeout` passes; returns the
  // current snapshot either way.
  std::shared_ptr<const AcceleratorSnapshot> wait_newer(std::uint64_t generation,
                                                        std::chrono::milliseconds timeout) const;

  // Called on a monitor thread for each publication that changes the device set or a device's
  // health, in order, before snapshot() returns it. Keep it short; it must not call stop() or
  // wait for a snapshot. Returns an id for unsubscribe().
  int subscribe(Listener listener);
  void unsubscribe(int id);

  // Has every opened backend list its devices again now, not at its next rescan, and waits for
  // the snapshot that follows: true when it is published within `timeout`. For the partition
  // manager, whose GPUs must be offered with the layout it just applied (a MIG change is seen
  // otherwise only at the next rescan, up to `rescan` later). A backend stuck in a vendor call
  // makes it wait the whole `timeout`.
  bool rescan_now(std::chrono::milliseconds timeout) const;

 private:
  void run_startup();
  void run_worker(size_t backend_index);
  void sample_pass(size_t backend_index);
  void poll_until(size_t backend_index, std::chrono::steady_clock::time_point deadline);
  void record_events(const std::vector<AcceleratorEvent>& events);
  void rescan(size_t backend_index);
  bool rescan_asked(size_t backend_index) const;
  // Builds a snapshot from the state, swaps it in and tells listeners what changed. Takes
  // state_mu_ itself; never call it holding a lock.
  void publish(bool device_set_changed);
  bool stopping() const;

  MonitorOptions options_;
  std::vector<std::unique_ptr<AcceleratorBackend>> backends_;
  std::thread startup_;
  std::vector<std::thread> workers_;

  mutable std::mutex state_mu_;  // guards the fields below it; never held during a vendor call
  HostModel host_;
  std::vector<AcceleratorBackendStatus> statuses_;
  std::vector<MonitoredDevice> devices_;
  HealthTracker tracker_;
  bool ready_ = false;
  bool stop_ = false;
  std::uint64_t generation_ = 0;
  std::shared_ptr<const HostModel> host_snapshot_;
  // rescan_now: how many were asked, and up to which each backend has rescanned.
  mutable std::uint64_t rescans_asked_ = 0;    // a request, not a change of what is monitored
  std::vector<std::uint64_t> rescans_done_;    // by backend; empty until ready
  mutable std::condition_variable rescan_cv_;  // with state_mu_

  mutable std::mutex snapshot_mu_;  // guards snapshot_; held only to copy or swap the pointer
  mutable std::condition_variable snapshot_cv_;
  std::shared_ptr<const AcceleratorSnapshot> snapshot_;

  std::mutex publish_mu_;  // one publish() at a time; taken before state_mu_
  std::mutex listeners_mu_;
  std::map<int, Listener> listeners_;
  int next_listener_ = 1;
};

}  // namespace polyaccel
