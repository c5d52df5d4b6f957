// The background accelerator monitor with the test builds of the three vendor libraries, driven
// step by step through their scenarios: the first snapshot, samples following the steps, a GPU
// that falls off the bus and comes back, fatal events, listeners, an NVML call that hangs
// while readers and the other vendors' samples go on, and MIG instances changed while it runs.
#include "discover/accel/monitor.h"

#include <dlfcn.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "discover/accel/backends.h"
#include "discover/accel/partition.h"
#include "discover/discover.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kWait = 30s;  // a bound for a hung test, not a timing assertion

const std::string kNvmlScenario = std::string(NVML_SCENARIO_DIR) + "/hgx-8xh100.json";
const std::string kRocmScenario = std::string(ROCM_SMI_SCENARIO_DIR) + "/mi300x-8x.json";
const std::string kHlmlScenario = std::string(HLML_SCENARIO_DIR) + "/gaudi2-8x.json";

// Calls polyaccel_inject_set_step in the copy of a test library the backend loaded.
void set_step(const std::string& library, unsigned step) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << library << ": " << ::dlerror();
  auto fn = reinterpret_cast<void (*)(unsigned)>(::dlsym(lib, "polyaccel_inject_set_step"));
  ASSERT_NE(fn, nullptr);
  fn(step);
  ::dlclose(lib);
}

class Monitor : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("NVML_INJECT_SCENARIO", kNvmlScenario.c_str(), 1);
    ::setenv("ROCM_SMI_INJECT_SCENARIO", kRocmScenario.c_str(), 1);
    ::setenv("HLML_INJECT_SCENARIO", kHlmlScenario.c_str(), 1);
    ::setenv("POLYACCEL_NVML_LIB", nvml_lib_.c_str(), 1);
    ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent/librocm_smi64.so.1", 1);
    ::setenv("POLYACCEL_HLML_LIB", "/nonexistent/libhlml.so", 1);
  }
  void TearDown() override {
    monitor_.reset();
    for (const char* v : {"POLYACCEL_NVML_LIB", "POLYACCEL_ROCM_SMI_LIB", "POLYACCEL_HLML_LIB",
                          "NVML_INJECT_HANG_FILE"})
      ::unsetenv(v);
  }

  // The Dell XE8640 fixture without vendor libraries: the monitor merges its own.
  static HostModel xe8640() {
    DiscoverOptions o;
    o.topology_xml = polyaccel::testing::topology_fixture(
        "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml");
    o.backends = BackendMode::off;
    auto m = discover_host(o);
    EXPECT_TRUE(m) << (m ? "" : m.error().message());
    return m ? *m : HostModel{};
  }

  AcceleratorMonitor& create(HealthPolicy policy = {}) {
    MonitorOptions o;
    o.interval = 20ms;
    o.rescan = 50ms;
    o.health = std::move(policy);
    monitor_ = std::make_unique<AcceleratorMonitor>(xe8640(), make_all_backends(), o);
    return *monitor_;
  }
  AcceleratorMonitor& start(HealthPolicy policy = {}) {
    create(std::move(policy)).start();
    return *monitor_;
  }

  // Waits for a snapshot that satisfies `pred`; fails the test after kWait.
  template <class Pred>
  std::shared_ptr<const AcceleratorSnapshot> wait_for(Pred pred) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    auto snap = monitor_->snapshot();
    while (!pred(*snap)) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::string backends;
        for (const auto& b : snap->backends)
          backends += " " + b.name + ": " + b.detail + ";";
        ADD_FAILURE() << "no snapshot satisfied the condition; last generation " << snap->generation
                      << ", devices " << snap->devices.size() << backends;
        return snap;
      }
      snap = monitor_->wait_newer(snap->generation, 1s);
    }
    return snap;
  }

  // Waits until every device of `backend` was sampled after `after`.
  std::shared_ptr<const AcceleratorSnapshot> wait_sampled_after(
      const std::string& backend, std::chrono::system_clock::time_point after) {
    return wait_for([&](const AcceleratorSnapshot& s) {
      bool any = false;
      for (const auto& d : s.devices) {
        if (d.backend != backend) continue;
        any = true;
        if (!d.sample || d.sample->time <= after) return false;
      }
      return any;
    });
  }

  std::string nvml_lib_ = NVML_INJECT_LIB;
  std::unique_ptr<AcceleratorMonitor> monitor_;
};

TEST_F(Monitor, FirstSnapshotHoldsTheMergedDevicesInPciOrder) {
  auto& m = create();
  EXPECT_EQ(m.snapshot()->host->accelerators.size(), 4u);  // before: hwloc's four H100s
  EXPECT_FALSE(m.snapshot()->ready);
  m.start();
  auto snap = wait_sampled_after("nvml", {});
  ASSERT_TRUE(snap->ready);
  ASSERT_EQ(snap->devices.size(), 8u);
  std::vector<std::string> buses;
  for (const auto& d : snap->devices)
    buses.push_back(d.pci_bus_id);
  EXPECT_THAT(buses, ElementsAre("0000:18:00.0", "0000:2a:00.0", "0000:4e:00.0", "0000:5f:00.0",
                                 "0000:9a:00.0", "0000:ab:00.0", "0000:cb:00.0", "0000:db:00.0"));
  EXPECT_EQ(snap->devices[0].id, "gpu0");
  EXPECT_EQ(snap->devices[7].id, "gpu7");
  EXPECT_EQ(snap->host->accelerators.size(), 8u);
  const MonitoredDevice* mig = snap->device("0000:db:00.0");
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ(mig->vendor, Vendor::nvidia);
  EXPECT_EQ(mig->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(mig->inventory.mig_instances.size(), 3u);
  EXPECT_EQ(mig->sample->gpu_temperature_c, 31.0);
  for (const auto& d : snap->devices)
    EXPECT_TRUE(d.health.healthy) << d.pci_bus_id;
  ASSERT_EQ(snap->backends.size(), 3u);
  EXPECT_TRUE(snap->backends[0].present);
  EXPECT_FALSE(snap->backends[1].present);
}

TEST_F(Monitor, SamplesFollowTheScenario) {
  auto& m = start();
  wait_sampled_after("nvml", {});
  set_step(nvml_lib_, 1);
  auto after = std::chrono::system_clock::now();
  auto snap = wait_sampled_after("nvml", after);
  const MonitoredDevice* capped = snap->device("gpu2");  // 4e:00.0, at its power cap
  ASSERT_NE(capped, nullptr);
  EXPECT_EQ(capped->pci_bus_id, "0000:4e:00.0");
  EXPECT_EQ(capped->sample->gpu_utilization_percent, 98.0);
  EXPECT_DOUBLE_EQ(*capped->sample->power_watts, 699.81);
  EXPECT_EQ(capped->sample->gpu_temperature_c, 83.0);
  EXPECT_EQ(snap->device("0000:db:00.0")->sample->gpu_utilization_percent, 41.0);
  EXPECT_GT(snap->generation, 1u);
  (void)m;
}

TEST_F(Monitor, LostGpuIsUnhealthyUntilItIsBackAndFatalEventsAreCounted) {
  HealthPolicy policy;
  policy.recovery = 0s;  // healthy as soon as it answers again
  auto& m = create(policy);
  std::mutex mu;
  std::vector<std::string> flipped;
  int set_changes = 0;
  int seen_by_readers_first = 0;  // listeners run before snapshot() returns their publication
  m.subscribe([&](const AcceleratorSnapshot& s, const MonitorChange& c) {
    std::lock_guard lock(mu);
    flipped.insert(flipped.end(), c.health_changed.begin(), c.health_changed.end());
    set_changes += c.device_set ? 1 : 0;
    seen_by_readers_first += m.snapshot()->generation >= s.generation ? 1 : 0;
  });
  m.start();
  wait_sampled_after("nvml", {});

  set_step(nvml_lib_, 2);  // 9a:00.0 falls off the bus, with XID 79
  auto lost = wait_for([](const AcceleratorSnapshot& s) {
    const auto* d = s.device("0000:9a:00.0");
    return !d->health.healthy && d->last_xid == 79u && !d->listed;
  });
  const MonitoredDevice* gone = lost->device("0000:9a:00.0");
  EXPECT_FALSE(gone->sample->reachable);
  EXPECT_EQ(gone->xid_count.at(79), 1u);
  EXPECT_EQ(gone->event_count(AcceleratorEventKind::xid), 1u);
  EXPECT_EQ(lost->devices.size(), 8u);  // still listed for the device plugin, as unhealthy

  set_step(nvml_lib_, 3);  // it is back; ab:00.0 gets XID 48 and a double-bit ECC event
  auto back = wait_for([](const AcceleratorSnapshot& s) {
    const auto* d = s.device("0000:9a:00.0");
    const auto* ab = s.device("0000:ab:00.0");
    return d->health.healthy && d->listed && ab->last_xid == 48u &&
           ab->event_count(AcceleratorEventKind::ecc_uncorrectable) == 1;
  });
  EXPECT_TRUE(back->device("0000:9a:00.0")->sample->reachable);
  EXPECT_EQ(back->device("0000:ab:00.0")->sample->remapped_rows_pending, true);
  m.stop();
  std::lock_guard lock(mu);
  EXPECT_GE(std::count(flipped.begin(), flipped.end(), "0000:9a:00.0"), 2);
  EXPECT_EQ(set_changes, 1);  // the first snapshot only: a lost device stays in the set
  EXPECT_EQ(seen_by_readers_first, 0);
}

TEST_F(Monitor, FatalXidKeepsTheDeviceUnhealthyForTheRecoveryTime) {
  auto& m = start();  // default policy: 60 s after the last fatal event
  wait_sampled_after("nvml", {});
  set_step(nvml_lib_, 2);
  wait_for([](const AcceleratorSnapshot& s) { return s.device("0000:9a:00.0")->last_xid; });
  set_step(nvml_lib_, 3);
  auto snap = wait_for([](const AcceleratorSnapshot& s) {
    const auto* d = s.device("0000:9a:00.0");
    const auto* ab = s.device("0000:ab:00.0");
    return d->sample && d->sample->reachable && !ab->health.healthy;
  });
  EXPECT_THAT(snap->device("0000:9a:00.0")->health.reason, HasSubstr("XID 79"));
  EXPECT_FALSE(snap->device("0000:9a:00.0")->health.healthy);
  EXPECT_THAT(snap->device("0000:ab:00.0")->health.reason,
              ::testing::AnyOf(HasSubstr("XID 48"), HasSubstr("uncorrectable ECC")));
  (void)m;
}

// The Gaudi2 scenario shares a bus id with the H100 one, so NVIDIA and AMD make the mixed fleet
// and Gaudi runs alone.
TEST_F(Monitor, MixedFleetSamplesEveryVendor) {
  ::setenv("POLYACCEL_ROCM_SMI_LIB", ROCM_SMI_INJECT_LIB, 1);
  start();
  auto snap = wait_for([](const AcceleratorSnapshot& s) {
    if (s.devices.size() != 16) return false;
    return std::all_of(s.devices.begin(), s.devices.end(),
                       [](const MonitoredDevice& d) { return d.sample.has_value(); });
  });
  std::map<Vendor, int> per_vendor;
  for (const auto& d : snap->devices)
    ++per_vendor[d.vendor];
  EXPECT_EQ(per_vendor[Vendor::nvidia], 8);
  EXPECT_EQ(per_vendor[Vendor::amd], 8);
  EXPECT_EQ(snap->devices[0].id, "gpu0");
  EXPECT_EQ(snap->devices[0].pci_bus_id, "0000:05:00.0");  // PCI order across vendors
  EXPECT_EQ(snap->device("0000:05:00.0")->inventory.gfx_version, "gfx942");
  EXPECT_EQ(snap->device("0000:05:00.0")->sample->power_watts, 131.0);
}

TEST_F(Monitor, GaudiCriticalErrorAndLostDevice) {
  ::setenv("POLYACCEL_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
  ::setenv("POLYACCEL_HLML_LIB", HLML_INJECT_LIB, 1);
  start();
  auto snap = wait_sampled_after("hlml", {});
  ASSERT_EQ(snap->devices.size(), 8u);
  EXPECT_EQ(snap->devices[0].vendor, Vendor::intel_gaudi);
  set_step(HLML_INJECT_LIB, 2);
  snap = wait_for([](const AcceleratorSnapshot& s) {
    return s.device("0000:9b:00.0")->event_count(AcceleratorEventKind::critical) > 0;
  });
  EXPECT_FALSE(snap->device("0000:9b:00.0")->health.healthy);
  set_step(HLML_INJECT_LIB, 3);
  snap = wait_for([](const AcceleratorSnapshot& s) {
    const auto* d = s.device("0000:9b:00.0");
    return d->sample && !d->sample->reachable;
  });
  EXPECT_THAT(snap->device("0000:9b:00.0")->health.reason, HasSubstr("no longer answers"));
}

// NVML's power reading blocks: readers still get the snapshot at once, AMD and Gaudi samples
// still advance, and NVIDIA's sample times stay where the hang began until it is released.
TEST_F(Monitor, HungVendorCallOnlyMakesItsSamplesOld) {
  polyaccel::testing::TempDir tmp;
  std::string gate = (tmp.path() / "hang").string();
  ::setenv("NVML_INJECT_HANG_FILE", gate.c_str(), 1);
  nvml_lib_ = NVML_INJECT_HANG_LIB;
  ::setenv("POLYACCEL_NVML_LIB", nvml_lib_.c_str(), 1);
  ::setenv("POLYACCEL_ROCM_SMI_LIB", ROCM_SMI_INJECT_LIB, 1);
  auto& m = start();
  wait_sampled_after("nvml", {});

  std::ofstream(gate).put('x');
  void* lib = ::dlopen(nvml_lib_.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  auto waiting = reinterpret_cast<unsigned (*)()>(::dlsym(lib, "polyaccel_inject_hang_waiting"));
  ASSERT_NE(waiting, nullptr);
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (waiting() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(waiting(), 1u);

  auto hung_at = m.snapshot();
  auto nvml_time = hung_at->device("0000:18:00.0")->sample->time;
  auto later = wait_sampled_after("rocm-smi", std::chrono::system_clock::now());
  EXPECT_GT(later->generation, hung_at->generation);
  EXPECT_EQ(later->device("0000:18:00.0")->sample->time, nvml_time);
  EXPECT_EQ(waiting(), 1u);  // still hung: the AMD samples did not wait for it

  std::filesystem::remove(gate);
  wait_sampled_after("nvml", std::chrono::system_clock::now());
  ::dlclose(lib);
}

TEST_F(Monitor, NoLibraryGivesAReadyEmptySnapshot) {
  ::setenv("POLYACCEL_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
  auto& m = start();
  auto snap = wait_for([](const AcceleratorSnapshot& s) { return s.ready; });
  EXPECT_TRUE(snap->devices.empty());
  EXPECT_EQ(snap->host->accelerators.size(), 4u);  // hwloc's, without inventory
  for (const auto& b : snap->backends)
    EXPECT_FALSE(b.present) << b.name;
  (void)m;
}

// `polyaccel mig apply` changes MIG instances while the agent runs: the monitor's rescan reads
// the layout again and tells listeners (the device plugin) of a device-set change, no restart.
// The change is made through the production MIG control on the same (stateful) test library.
TEST_F(Monitor, MigInstancesChangedWhileRunningArePickedUp) {
  const std::string scenario = std::string(NVML_SCENARIO_DIR) + "/hgx-8xh200-mig.json";
  ::setenv("NVML_INJECT_SCENARIO", scenario.c_str(), 1);
  MonitorOptions o;
  o.interval = 20ms;
  o.rescan = 50ms;
  monitor_ = std::make_unique<AcceleratorMonitor>(HostModel{}, make_all_backends(), o);
  std::mutex mu;
  std::vector<std::string> set_changes;  // the MIG layout of 0000:18:00.0 at each change
  monitor_->subscribe([&](const AcceleratorSnapshot& s, const MonitorChange& c) {
    const MonitoredDevice* d = s.device("0000:18:00.0");
    if (!c.device_set || !d) return;
    std::lock_guard lock(mu);
    set_changes.push_back(std::to_string(d->inventory.mig_instances.size()));
  });
  monitor_->start();
  auto instances = [](const AcceleratorSnapshot& s) {
    const MonitoredDevice* d = s.device("0000:18:00.0");
    return d ? d->inventory.mig_instances : std::vector<MigInstance>{};
  };
  auto before =
      instances(*wait_for([&](const AcceleratorSnapshot& s) { return !instances(s).empty(); }));

  auto control = open_nvml_mig_control();
  ASSERT_TRUE(control) << control.error().message();
  auto gpus = (*control)->gpus();
  ASSERT_TRUE(gpus) << gpus.error().message();
  auto gpu = std::find_if(gpus->begin(), gpus->end(),
                          [](const MigGpu& g) { return g.pci_bus_id == "0000:18:00.0"; });
  ASSERT_NE(gpu, gpus->end());
  ASSERT_EQ(gpu->instances.size(), before.size());
  MigPlacedInstance gone = gpu->instances.front();
  ASSERT_TRUE((*control)->destroy(gpu->index, gone.gpu_instance_id));

  auto shrunk = wait_for(
      [&](const AcceleratorSnapshot& s) { return instances(s).size() == before.size() - 1; });
  for (const auto& m : instances(*shrunk))
    EXPECT_NE(m.uuid, gone.uuid);

  auto made = (*control)->create(gpu->index, gone.profile_id, gone.start);
  ASSERT_TRUE(made) << made.error().message();
  auto grown = wait_for([&](const AcceleratorSnapshot& s) {
    auto now = instances(s);
    return std::any_of(now.begin(), now.end(),
                       [&](const MigInstance& m) { return m.uuid == made->uuid; });
  });
  EXPECT_EQ(instances(*grown).size(), before.size());
  monitor_->stop();
  std::lock_guard lock(mu);
  // The first listing, the destroy and the create each reached listeners as a device-set change.
  EXPECT_NE(std::find(set_changes.begin(), set_changes.end(), std::to_string(before.size() - 1)),
            set_changes.end());
  ASSERT_FALSE(set_changes.empty());
  EXPECT_EQ(set_changes.back(), std::to_string(before.size()));
}

}  // namespace
}  // namespace polyaccel
