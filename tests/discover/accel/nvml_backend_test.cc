// The NVML backend through its production loader, against our test build of libnvidia-ml.so.1
// (tests/inject/nvml) driven by the 8×H100 HGX scenario: inventory, samples step by step, events,
// a GPU that falls off the bus and comes back, a library lacking half of its symbols, broken and
// absent libraries, and the merge into the XE8640 fixture's HostModel.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "discover/accel/backends.h"
#include "discover/discover.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kMiB = 1ULL << 20;
const std::string kScenario = std::string(NVML_SCENARIO_DIR) + "/hgx-8xh100.json";
const std::vector<std::string> kBuses = {"0000:18:00.0", "0000:2a:00.0", "0000:4e:00.0",
                                         "0000:5f:00.0", "0000:9a:00.0", "0000:ab:00.0",
                                         "0000:cb:00.0", "0000:db:00.0"};

class NvmlBackend : public ::testing::Test {
 protected:
  void TearDown() override {
    backend_.reset();
    if (control_) ::dlclose(control_);
  }

  // Points the production loader at `lib` and the test library at `scenario`, then opens.
  AcceleratorBackend& open(const std::string& lib = NVML_INJECT_LIB,
                           const std::string& scenario = kScenario) {
    ::setenv("POLYACCEL_NVML_LIB", lib.c_str(), 1);
    ::setenv("NVML_INJECT_SCENARIO", scenario.c_str(), 1);
    backend_ = make_nvml_backend();
    Status st = backend_->open();
    EXPECT_TRUE(st) << (st ? "" : st.error().message());
    lib_ = lib;
    return *backend_;
  }

  // The test library's own control, found in the copy the backend loaded.
  void set_step(unsigned step) {
    if (!control_) control_ = ::dlopen(lib_.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    ASSERT_NE(control_, nullptr) << ::dlerror();
    auto fn = reinterpret_cast<void (*)(unsigned)>(::dlsym(control_, "polyaccel_inject_set_step"));
    ASSERT_NE(fn, nullptr);
    fn(step);
  }

  std::vector<AcceleratorBackend::Device> devices() {
    auto d = backend_->devices();
    EXPECT_TRUE(d) << (d ? "" : d.error().message());
    return d ? *d : std::vector<AcceleratorBackend::Device>{};
  }

  std::unique_ptr<AcceleratorBackend> backend_;
  std::string lib_;
  void* control_ = nullptr;
};

const AcceleratorBackend::Device& by_bus(const std::vector<AcceleratorBackend::Device>& devices,
                                         const std::string& bus) {
  auto it = std::find_if(devices.begin(), devices.end(),
                         [&](const auto& d) { return d.pci_bus_id == bus; });
  EXPECT_NE(it, devices.end()) << bus;
  static const AcceleratorBackend::Device none;
  return it == devices.end() ? none : *it;
}

TEST_F(NvmlBackend, InventoryOfAnHgxH100Node) {
  auto& b = open();
  EXPECT_EQ(b.name(), "nvml");
  EXPECT_EQ(b.vendor(), Vendor::nvidia);
  EXPECT_EQ(b.library().path, NVML_INJECT_LIB);
  EXPECT_TRUE(b.library().missing_symbols.empty());
  auto devs = devices();
  ASSERT_EQ(devs.size(), 8u);
  std::set<std::string> uuids;
  for (size_t i = 0; i < devs.size(); ++i) {
    const auto& d = devs[i];
    EXPECT_EQ(d.pci_bus_id, kBuses[i]);
    const auto& inv = d.inventory;
    EXPECT_EQ(inv.backend, "nvml");
    EXPECT_EQ(inv.index, i);
    EXPECT_THAT(inv.uuid, ::testing::StartsWith("GPU-"));
    uuids.insert(inv.uuid);
    EXPECT_EQ(inv.serial.size(), 13u) << inv.serial;
    EXPECT_EQ(inv.product_name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(inv.memory_total_bytes, 81559 * kMiB);
    EXPECT_EQ(inv.driver_version, "550.90.07");
    EXPECT_EQ(inv.compute_capability, "9.0");
    EXPECT_EQ(inv.power_limit_watts, 700.0);
    EXPECT_EQ(inv.ecc_enabled, true);
    EXPECT_EQ(inv.ecc_pending, true);
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(devs[0].inventory.uuid, "GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21");

  // MIG: off on most, pending on cb:00.0, on with three instances on db:00.0.
  EXPECT_EQ(by_bus(devs, "0000:4e:00.0").inventory.mig_enabled, false);
  EXPECT_EQ(by_bus(devs, "0000:4e:00.0").inventory.mig_pending, false);
  EXPECT_EQ(by_bus(devs, "0000:cb:00.0").inventory.mig_enabled, false);
  EXPECT_EQ(by_bus(devs, "0000:cb:00.0").inventory.mig_pending, true);
  EXPECT_TRUE(by_bus(devs, "0000:cb:00.0").inventory.mig_instances.empty());
  const auto& mig = by_bus(devs, "0000:db:00.0").inventory;
  EXPECT_EQ(mig.mig_enabled, true);
  ASSERT_EQ(mig.mig_instances.size(), 3u);
  const MigInstance& big = mig.mig_instances[0];
  EXPECT_EQ(big.gpu_instance_id, 2u);
  EXPECT_EQ(big.compute_instance_id, 0u);
  EXPECT_EQ(big.profile_id, 9u);
  EXPECT_EQ(big.profile_name, "3g.40gb");
  EXPECT_EQ(big.placement_start, 4u);
  EXPECT_EQ(big.placement_size, 4u);
  EXPECT_EQ(big.uuid, "MIG-7c1d9e42-30ab-5f86-b2e4-9a0c6d1f3e58");
  EXPECT_EQ(big.memory_bytes, 40192 * kMiB);
  EXPECT_EQ(mig.mig_instances[1].profile_name, "2g.20gb");
  EXPECT_EQ(mig.mig_instances[1].placement_start, 0u);
  EXPECT_EQ(mig.mig_instances[2].profile_name, "1g.10gb");
  EXPECT_EQ(mig.mig_instances[2].gpu_instance_id, 9u);
  EXPECT_EQ(mig.mig_instances[2].profile_id, 19u);

  // NVLink: 18 links per GPU to the NVSwitches make every pair NV18; the switches are no peers.
  for (const auto& d : devs) {
    ASSERT_EQ(d.peer_links.size(), 7u) << d.pci_bus_id;
    for (const auto& p : d.peer_links) {
      EXPECT_NE(p.peer.to_string(), d.pci_bus_id);
      EXPECT_THAT(kBuses, Contains(p.peer.to_string()));
      EXPECT_EQ(p.link, (Link{LinkLevel::nvlink, 18})) << d.pci_bus_id << " " << p.peer.to_string();
    }
  }
}

TEST_F(NvmlBackend, SamplesFollowTheScenarioStepByStep) {
  auto& b = open();
  (void)devices();
  AcceleratorSample idle = b.sample("0000:4e:00.0");
  EXPECT_TRUE(idle.reachable);
  EXPECT_EQ(idle.pci_bus_id, "0000:4e:00.0");
  EXPECT_EQ(idle.gpu_utilization_percent, 0.0);
  EXPECT_EQ(idle.memory_utilization_percent, 0.0);
  EXPECT_EQ(idle.memory_used_bytes, 0u);
  EXPECT_EQ(idle.memory_free_bytes, 81559 * kMiB);
  EXPECT_EQ(idle.gpu_temperature_c, 31.0);
  EXPECT_EQ(idle.memory_temperature_c, 38.0);
  EXPECT_EQ(idle.power_watts, 71.25);
  EXPECT_EQ(idle.energy_millijoules, 4127554000u + 2 * 13250000u);
  EXPECT_EQ(idle.sm_clock_mhz, 345u);
  EXPECT_EQ(idle.memory_clock_mhz, 2619u);
  EXPECT_EQ(idle.pcie_replay_count, 0u);
  EXPECT_EQ(idle.ecc_corrected_volatile, 0u);
  EXPECT_EQ(idle.ecc_uncorrected_volatile, 0u);
  EXPECT_EQ(idle.ecc_corrected_aggregate, 2u);
  EXPECT_EQ(idle.ecc_uncorrected_aggregate, 0u);
  EXPECT_EQ(idle.remapped_rows_correctable, 0u);
  EXPECT_EQ(idle.remapped_rows_uncorrectable, 0u);
  EXPECT_EQ(idle.remapped_rows_pending, false);
  EXPECT_EQ(idle.remapped_rows_failure, false);
  EXPECT_EQ(idle.throttle_reasons, 1u);
  EXPECT_THAT(idle.throttle_reason_names, ElementsAre("gpu_idle"));

  set_step(1);
  AcceleratorSample busy = b.sample("0000:4e:00.0");
  EXPECT_TRUE(busy.reachable);
  EXPECT_EQ(busy.gpu_utilization_percent, 98.0);
  EXPECT_EQ(busy.memory_utilization_percent, 61.0);
  EXPECT_EQ(busy.memory_used_bytes, 74211 * kMiB);
  EXPECT_EQ(busy.memory_free_bytes, (81559 - 74211) * kMiB);
  EXPECT_EQ(busy.gpu_temperature_c, 83.0);
  EXPECT_EQ(busy.memory_temperature_c, 79.0);
  EXPECT_EQ(busy.power_watts, 699.81);
  EXPECT_EQ(busy.sm_clock_mhz, 1755u);
  EXPECT_EQ(busy.throttle_reasons, 4u);
  EXPECT_THAT(busy.throttle_reason_names, ElementsAre("sw_power_cap"));
  ASSERT_TRUE(busy.energy_millijoules && idle.energy_millijoules);
  EXPECT_EQ(*busy.energy_millijoules - *idle.energy_millijoules, 71000u * 60);
  // Another GPU at the same step: the common busy values, not 4e's.
  AcceleratorSample other = b.sample("0000:18:00.0");
  EXPECT_EQ(other.power_watts, 652.34);
  EXPECT_EQ(other.throttle_reasons, 0u);
  EXPECT_TRUE(other.throttle_reason_names.empty());

  // Counters move: corrected ECC on 18:00.0, PCIe replays on 2a:00.0, an uncorrectable error with
  // a pending row remap on ab:00.0.
  set_step(2);
  EXPECT_EQ(b.sample("0000:18:00.0").ecc_corrected_volatile, 3u);
  EXPECT_EQ(b.sample("0000:18:00.0").ecc_corrected_aggregate, 5u);
  set_step(3);
  EXPECT_EQ(b.sample("0000:2a:00.0").pcie_replay_count, 12u);
  AcceleratorSample bad = b.sample("0000:ab:00.0");
  EXPECT_EQ(bad.ecc_uncorrected_volatile, 1u);
  EXPECT_EQ(bad.remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(bad.remapped_rows_pending, true);
  // Values carry forward until a step changes them.
  EXPECT_EQ(bad.gpu_utilization_percent, 98.0);
  set_step(4);
  AcceleratorSample after = b.sample("0000:4e:00.0");
  EXPECT_EQ(after.gpu_utilization_percent, 0.0);
  EXPECT_EQ(after.gpu_temperature_c, 36.0);
  EXPECT_GT(*after.energy_millijoules, *busy.energy_millijoules);
}

// DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL as DCGM computes it from NVML's NVLink data counters: the
// increase of sent + received KiB between two samples, per second, divided by 1000; 0 on the
// first sample. At the training step every non-MIG GPU moves 148736 + 148224 MiB/s.
TEST_F(NvmlBackend, NvlinkBandwidthIsDcgmsRateOfTheDataCounters) {
  auto& b = open();
  (void)devices();
  set_step(1);
  EXPECT_EQ(b.sample("0000:2a:00.0").nvlink_bandwidth_mb_per_second, 0.0);
  EXPECT_EQ(b.sample("0000:db:00.0").nvlink_bandwidth_mb_per_second, 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  AcceleratorSample busy = b.sample("0000:2a:00.0");
  ASSERT_TRUE(busy.nvlink_bandwidth_mb_per_second);
  EXPECT_NEAR(*busy.nvlink_bandwidth_mb_per_second, (148736 + 148224) * 1024 / 1000.0, 1.0);
  EXPECT_EQ(*busy.nvlink_bandwidth_mb_per_second, std::trunc(*busy.nvlink_bandwidth_mb_per_second));
  // The MIG GPU's NVLinks are idle at this step.
  EXPECT_EQ(b.sample("0000:db:00.0").nvlink_bandwidth_mb_per_second, 0.0);
  // Idle again: the counters stop growing.
  set_step(4);
  (void)b.sample("0000:2a:00.0");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(b.sample("0000:2a:00.0").nvlink_bandwidth_mb_per_second, 0.0);
}

TEST_F(NvmlBackend, UnsupportedFieldsAreLeftEmpty) {
  auto& b = open();
  (void)devices();
  for (const auto& bus : kBuses) {
    AcceleratorSample s = b.sample(bus);
    EXPECT_TRUE(s.reachable) << bus;
    // H100 remaps rows instead of retiring pages: NVML says not supported.
    EXPECT_FALSE(s.retired_pages_single_bit) << bus;
    EXPECT_FALSE(s.retired_pages_double_bit) << bus;
    EXPECT_TRUE(s.remapped_rows_correctable) << bus;
    if (bus == "0000:5f:00.0") {
      EXPECT_FALSE(s.memory_temperature_c);
    } else {
      EXPECT_EQ(s.memory_temperature_c, 38.0) << bus;
    }
    EXPECT_EQ(s.gpu_temperature_c, 31.0) << bus;
  }
  // A bus id NVML does not know: unreachable, not a crash.
  EXPECT_FALSE(b.sample("0000:77:00.0").reachable);
  EXPECT_FALSE(b.sample("not a bus id").reachable);
}

TEST_F(NvmlBackend, XidAndEccEventsArriveAtTheirStep) {
  auto& b = open();
  (void)devices();
  EXPECT_TRUE(b.poll_events(std::chrono::milliseconds(0)).empty());
  set_step(1);
  EXPECT_TRUE(b.poll_events(std::chrono::milliseconds(10)).empty());

  set_step(2);
  auto events = b.poll_events(std::chrono::milliseconds(2000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:9a:00.0");
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::xid);
  EXPECT_EQ(events[0].code, 79u);
  EXPECT_THAT(events[0].text, HasSubstr("79"));
  EXPECT_TRUE(b.poll_events(std::chrono::milliseconds(0)).empty());  // delivered once

  set_step(3);
  events = b.poll_events(std::chrono::milliseconds(2000));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:ab:00.0");
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::xid);
  EXPECT_EQ(events[0].code, 48u);
  EXPECT_EQ(events[1].pci_bus_id, "0000:ab:00.0");
  EXPECT_EQ(events[1].kind, AcceleratorEventKind::ecc_uncorrectable);
}

// On a MIG GPU the event names the GPU instance and, where it has one, the compute instance.
TEST_F(NvmlBackend, MigEventsNameTheirInstance) {
  auto& b = open();
  (void)devices();
  EXPECT_TRUE(b.poll_events(std::chrono::milliseconds(0)).empty());
  set_step(4);
  auto events = b.poll_events(std::chrono::milliseconds(2000));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:db:00.0");
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::xid);
  EXPECT_EQ(events[0].code, 94u);
  EXPECT_EQ(events[0].gpu_instance_id, std::optional<unsigned>(3));
  EXPECT_EQ(events[0].compute_instance_id, std::optional<unsigned>(0));
  EXPECT_THAT(events[0].text, HasSubstr("GPU instance 3, compute instance 0"));
  EXPECT_EQ(events[1].kind, AcceleratorEventKind::ecc_uncorrectable);
  EXPECT_EQ(events[1].gpu_instance_id, std::optional<unsigned>(9));
  EXPECT_FALSE(events[1].compute_instance_id);
  EXPECT_THAT(events[1].text, HasSubstr("GPU instance 9"));
}

// Events of a whole GPU carry no instance.
TEST_F(NvmlBackend, EventsOfAWholeGpuHaveNoInstance) {
  auto& b = open();
  (void)devices();
  EXPECT_TRUE(b.poll_events(std::chrono::milliseconds(0)).empty());  // registers every GPU
  set_step(2);
  auto events = b.poll_events(std::chrono::milliseconds(2000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].gpu_instance_id);
  EXPECT_FALSE(events[0].compute_instance_id);
  EXPECT_THAT(events[0].text, ::testing::Not(HasSubstr("instance")));
}

TEST_F(NvmlBackend, AGpuFallsOffTheBusAndComesBack) {
  auto& b = open();
  (void)devices();
  set_step(1);
  EXPECT_TRUE(b.sample("0000:9a:00.0").reachable);

  set_step(2);  // every call on 9a:00.0 answers NVML_ERROR_GPU_IS_LOST
  AcceleratorSample lost = b.sample("0000:9a:00.0");
  EXPECT_FALSE(lost.reachable);
  EXPECT_EQ(lost.pci_bus_id, "0000:9a:00.0");
  EXPECT_FALSE(lost.gpu_utilization_percent);
  EXPECT_FALSE(lost.gpu_temperature_c);
  EXPECT_FALSE(lost.power_watts);
  // The others go on.
  EXPECT_TRUE(b.sample("0000:ab:00.0").reachable);
  EXPECT_EQ(b.sample("0000:ab:00.0").gpu_utilization_percent, 98.0);
  // Listing devices while it is lost still works and leaves it out.
  EXPECT_EQ(devices().size(), 7u);

  set_step(3);
  AcceleratorSample back = b.sample("0000:9a:00.0");
  EXPECT_TRUE(back.reachable);
  EXPECT_EQ(back.gpu_utilization_percent, 98.0);
  EXPECT_EQ(back.gpu_temperature_c, 67.0);
}

TEST_F(NvmlBackend, AGpuLostBeforeTheFirstListingIsFoundWhenItReturns) {
  ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
  ::setenv("NVML_INJECT_SCENARIO", kScenario.c_str(), 1);
  backend_ = make_nvml_backend();
  ASSERT_TRUE(backend_->open());
  lib_ = NVML_INJECT_LIB;
  set_step(2);
  auto devs = devices();
  EXPECT_EQ(devs.size(), 7u);
  EXPECT_FALSE(backend_->sample("0000:9a:00.0").reachable);
  set_step(3);
  EXPECT_TRUE(backend_->sample("0000:9a:00.0").reachable);
  EXPECT_EQ(devices().size(), 8u);
}

TEST_F(NvmlBackend, ALibraryLackingHalfItsSymbolsGivesWhatItHas) {
  auto& b = open(NVML_INJECT_PARTIAL_LIB);
  const auto& missing = b.library().missing_symbols;
  for (const char* name : {"nvmlDeviceGetTemperature", "nvmlDeviceGetFieldValues",
                           "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEnergyConsumption",
                           "nvmlDeviceGetClockInfo", "nvmlDeviceGetPcieReplayCounter",
                           "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPages",
                           "nvmlDeviceGetRemappedRows", "nvmlDeviceGetCurrentClocksThrottleReasons",
                           "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                           "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlEventSetCreate",
                           "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", "nvmlEventSetFree"}) {
    EXPECT_THAT(missing, Contains(std::string(name)));
  }
  EXPECT_THAT(missing, Not(Contains(std::string("nvmlDeviceGetUtilizationRates"))));
  EXPECT_THAT(missing, Not(Contains(std::string("nvmlInit_v2"))));
  // and the GPM, encoder/decoder and v2 memory calls (nine).
  EXPECT_EQ(missing.size(), 17u + 9u);

  auto devs = devices();
  ASSERT_EQ(devs.size(), 8u);
  EXPECT_EQ(devs[2].inventory.product_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(devs[2].inventory.memory_total_bytes, 81559 * kMiB);
  EXPECT_EQ(devs[7].inventory.mig_instances.size(), 3u);
  for (const auto& d : devs)
    EXPECT_TRUE(d.peer_links.empty()) << d.pci_bus_id;

  set_step(1);
  AcceleratorSample s = b.sample("0000:4e:00.0");
  EXPECT_TRUE(s.reachable);
  EXPECT_EQ(s.gpu_utilization_percent, 98.0);
  EXPECT_EQ(s.memory_used_bytes, 74211 * kMiB);
  EXPECT_FALSE(s.gpu_temperature_c);
  EXPECT_FALSE(s.power_watts);
  EXPECT_FALSE(s.throttle_reasons);
  set_step(2);
  EXPECT_TRUE(b.poll_events(std::chrono::milliseconds(10)).empty());
  EXPECT_FALSE(b.sample("0000:9a:00.0").reachable);  // still sees the lost GPU
}

TEST_F(NvmlBackend, AFileThatIsNotALibraryIsAClearError) {
  polyaccel::testing::TempDir dir;
  auto path = dir.path() / "libnvidia-ml.so.1";
  std::ofstream(path) << "this is not an ELF file\n";
  ::setenv("POLYACCEL_NVML_LIB", path.c_str(), 1);
  auto b = make_nvml_backend();
  Status st = b->open();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::bad_input);
  EXPECT_THAT(st.error().message(), HasSubstr(path.string()));
  EXPECT_FALSE(b->sample("0000:4e:00.0").reachable);
  EXPECT_TRUE(b->poll_events(std::chrono::milliseconds(0)).empty());

  // The rest of polyaccel goes on: the merge reports it and leaves the model alone.
  HostModel model;
  std::vector<std::unique_ptr<AcceleratorBackend>> backends;
  backends.push_back(make_nvml_backend());
  auto statuses = merge_accelerators(model, backends);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_FALSE(statuses[0].present);
  EXPECT_THAT(statuses[0].detail, HasSubstr("failed"));
  EXPECT_TRUE(model.accelerators.empty());
}

TEST_F(NvmlBackend, AnInitErrorIsAClearError) {
  polyaccel::testing::TempDir dir;
  auto scenario = dir.path() / "no-driver.json";
  std::ofstream(scenario) << R"({"init_error": 9, "devices": []})";
  ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
  ::setenv("NVML_INJECT_SCENARIO", scenario.c_str(), 1);
  auto b = make_nvml_backend();
  Status st = b->open();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::unsupported);
  EXPECT_THAT(st.error().message(), HasSubstr("Driver Not Loaded"));
  EXPECT_THAT(st.error().message(), HasSubstr(NVML_INJECT_LIB));
  EXPECT_FALSE(b->devices());
  EXPECT_FALSE(b->sample("0000:4e:00.0").reachable);
}

TEST_F(NvmlBackend, NoLibraryMeansAbsent) {
  ::setenv("POLYACCEL_NVML_LIB", "/nonexistent/polyaccel/libnvidia-ml.so.1", 1);
  auto b = make_nvml_backend();
  Status st = b->open();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::not_found);
  EXPECT_TRUE(b->poll_events(std::chrono::milliseconds(0)).empty());

  HostModel model;
  std::vector<std::unique_ptr<AcceleratorBackend>> backends;
  backends.push_back(make_nvml_backend());
  auto statuses = merge_accelerators(model, backends);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_FALSE(statuses[0].present);
  EXPECT_THAT(statuses[0].detail, HasSubstr("absent"));
}

TEST_F(NvmlBackend, DirectNvlinksAreCountedPerPeer) {
  // The XE8640's board: four H100 SXM5 with 6 NVLinks to each of the other three, no NVSwitch.
  polyaccel::testing::TempDir dir;
  const std::vector<std::string> buses = {"0000:4e:00.0", "0000:5f:00.0", "0000:cb:00.0",
                                          "0000:db:00.0"};
  std::string devices_json;
  for (const auto& me : buses) {
    std::string links;
    for (const auto& peer : buses) {
      if (peer == me) continue;
      links += std::string(links.empty() ? "" : ",") + R"({"remote":")" + peer + R"(","count":6})";
    }
    devices_json += std::string(devices_json.empty() ? "" : ",") + R"({"pci_bus_id":")" + me +
                    R"(","uuid":"GPU-)" + me + R"(","name":"NVIDIA H100 80GB HBM3","nvlinks":[)" +
                    links + "]}";
  }
  auto scenario = dir.path() / "xe8640.json";
  std::ofstream(scenario) << R"({"devices":[)" + devices_json + "]}";
  open(NVML_INJECT_LIB, scenario.string());
  auto devs = devices();
  ASSERT_EQ(devs.size(), 4u);
  for (const auto& d : devs) {
    ASSERT_EQ(d.peer_links.size(), 3u) << d.pci_bus_id;
    for (const auto& p : d.peer_links)
      EXPECT_EQ(p.link, (Link{LinkLevel::nvlink, 6}));
  }
}

// NVML_NVLINK_MAX_LINKS is 36 from CUDA 13.3's nvml.h: two B200-like GPUs joined by 36 direct
// links are NV36 peers, links 18 to 35 included.
TEST_F(NvmlBackend, LinksPastTheEighteenthAreCounted) {
  open(NVML_INJECT_LIB, std::string(NVML_SCENARIO_DIR) + "/b200-nvlink36-mig.json");
  auto devs = devices();
  ASSERT_EQ(devs.size(), 2u);
  ASSERT_EQ(by_bus(devs, "0000:18:00.0").peer_links.size(), 1u);
  EXPECT_EQ(by_bus(devs, "0000:18:00.0").peer_links[0].link, (Link{LinkLevel::nvlink, 36}));
  EXPECT_EQ(by_bus(devs, "0000:18:00.0").peer_links[0].peer.to_string(), "0000:2a:00.0");
  ASSERT_EQ(by_bus(devs, "0000:2a:00.0").peer_links.size(), 1u);
  EXPECT_EQ(by_bus(devs, "0000:2a:00.0").peer_links[0].link, (Link{LinkLevel::nvlink, 36}));
}

// A driver built from an older nvml.h knows 18 links and answers NVML_ERROR_INVALID_ARGUMENT for
// link 18 and up: that is "no such link", not a failure, and the 18 it has are counted.
TEST_F(NvmlBackend, AnOlderDriversUnknownLinksAreNoLinks) {
  polyaccel::testing::TempDir dir;
  auto scenario = dir.path() / "h100-pair.json";
  std::ofstream(scenario) << R"({"nvlink_max_links": 18, "devices": [
      {"pci_bus_id": "0000:18:00.0", "uuid": "GPU-a", "name": "NVIDIA H100 80GB HBM3",
       "nvlinks": [{"remote": "0000:2a:00.0", "count": 18}]},
      {"pci_bus_id": "0000:2a:00.0", "uuid": "GPU-b", "name": "NVIDIA H100 80GB HBM3",
       "nvlinks": [{"remote": "0000:18:00.0", "count": 18}]}],
    "steps": [{"all": {"gpu_util": 5}}]})";
  open(NVML_INJECT_LIB, scenario.string());
  auto devs = devices();
  ASSERT_EQ(devs.size(), 2u);
  for (const auto& d : devs) {
    ASSERT_EQ(d.peer_links.size(), 1u) << d.pci_bus_id;
    EXPECT_EQ(d.peer_links[0].link, (Link{LinkLevel::nvlink, 18}));
    EXPECT_TRUE(backend_->sample(d.pci_bus_id).reachable);
  }
}

TEST_F(NvmlBackend, MergeFillsTheXe8640FixtureAndAddsTheOtherGpus) {
  DiscoverOptions o;
  o.topology_xml = polyaccel::testing::topology_fixture(
                       "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml")
                       .string();
  auto m = discover_host(o);
  ASSERT_TRUE(m) << m.error().message();
  HostModel model = *m;
  ASSERT_EQ(model.accelerators.size(), 4u);
  const Accelerator* before = model.accelerator("0000:5f:00.0");
  ASSERT_NE(before, nullptr);
  auto numa_before = before->pci.numa_nodes;
  auto switches_before = before->pci.switches.size();

  ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
  ::setenv("NVML_INJECT_SCENARIO", kScenario.c_str(), 1);
  std::vector<std::unique_ptr<AcceleratorBackend>> backends;
  backends.push_back(make_nvml_backend());
  auto statuses = merge_accelerators(model, backends);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_TRUE(statuses[0].present) << statuses[0].detail;
  EXPECT_THAT(statuses[0].detail, HasSubstr("8 devices"));

  ASSERT_EQ(model.accelerators.size(), 8u);
  for (size_t i = 0; i < kBuses.size(); ++i) {
    const Accelerator& a = model.accelerators[i];
    EXPECT_EQ(a.pci.address.to_string(), kBuses[i]);
    EXPECT_EQ(a.id, "gpu" + std::to_string(i));
    EXPECT_EQ(a.vendor, Vendor::nvidia);
    ASSERT_TRUE(a.inventory) << kBuses[i];
    EXPECT_EQ(a.inventory->backend, "nvml");
    EXPECT_THAT(a.inventory->uuid, ::testing::StartsWith("GPU-"));
    EXPECT_EQ(a.name, "NVIDIA H100 80GB HBM3");
  }
  // The fixture's GPUs keep what hwloc knew of them.
  const Accelerator* after = model.accelerator("0000:5f:00.0");
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->pci.numa_nodes, numa_before);
  EXPECT_EQ(after->pci.switches.size(), switches_before);
  EXPECT_EQ(after->inventory->uuid, "GPU-a08d5c27-6e1b-f349-82d7-5c0e1a3f9b74");
  EXPECT_EQ(model.accelerator("0000:db:00.0")->inventory->mig_instances.size(), 3u);

  // The NVSwitch fabric replaces hwloc's NV6 matrix: NV18 between every pair, fixture or not.
  for (const auto& a : model.accelerators) {
    auto i = model.links.index_of(a.id);
    ASSERT_TRUE(i) << a.id;
    for (const auto& other : model.accelerators) {
      if (other.id == a.id) continue;
      auto j = model.links.index_of(other.id);
      ASSERT_TRUE(j) << other.id;
      EXPECT_EQ(model.links.at(*i, *j).label(), "NV18") << a.id << " " << other.id;
    }
  }
}

}  // namespace
}  // namespace polyaccel
