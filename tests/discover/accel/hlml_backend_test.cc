// The hlml backend through its production loader (POLYACCEL_HLML_LIB + dlopen) against our test
// build of libhlml.so (tests/inject/hlml), driven by the 8x Gaudi2 scenario.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "discover/accel/backends.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;
using namespace std::chrono_literals;

constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr unsigned long long kCriticalErr = 1ULL << 1;  // HLML_EVENT_CRITICAL_ERR

const std::vector<std::string> kBusIds = {"0000:19:00.0", "0000:1a:00.0", "0000:33:00.0",
                                          "0000:34:00.0", "0000:9a:00.0", "0000:9b:00.0",
                                          "0000:b3:00.0", "0000:b4:00.0"};
const std::string kFlaky = "0000:9b:00.0";     // critical error at step 2, lost at 3, back at 4
const std::string kNoEnergy = "0000:b4:00.0";  // energy counter unsupported

std::string scenario_path() {
  return std::string(HLML_SCENARIO_DIR) + "/gaudi2-8x.json";
}

nlohmann::json load_scenario() {
  std::ifstream in(scenario_path());
  return nlohmann::json::parse(in);
}

// The test's handle on the scenario: dlopen of the very path the backend loads (the same object
// in this process) and the one extra symbol only the test build has.
class InjectControl {
 public:
  explicit InjectControl(const char* path) : handle_(::dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_) {
      set_step_ =
          reinterpret_cast<int (*)(unsigned)>(::dlsym(handle_, "polyaccel_inject_set_step"));
    }
  }
  ~InjectControl() {
    if (handle_) ::dlclose(handle_);
  }
  InjectControl(const InjectControl&) = delete;
  InjectControl& operator=(const InjectControl&) = delete;

  bool ok() const { return set_step_ != nullptr; }
  void set_step(unsigned step) {
    ASSERT_TRUE(set_step_);
    ASSERT_EQ(set_step_(step), 0) << "step " << step;
  }

 private:
  void* handle_ = nullptr;
  int (*set_step_)(unsigned) = nullptr;
};

void use_library(const std::string& library, const std::string& scenario) {
  ::setenv("POLYACCEL_HLML_LIB", library.c_str(), 1);
  ::setenv("HLML_INJECT_SCENARIO", scenario.c_str(), 1);
}

class HlmlBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    use_library(HLML_INJECT_LIB, scenario_path());
    ASSERT_TRUE(inject_.ok()) << HLML_INJECT_LIB << ": " << ::dlerror();
  }
  void TearDown() override {
    ::unsetenv("POLYACCEL_HLML_LIB");
    ::unsetenv("HLML_INJECT_SCENARIO");
  }
  std::unique_ptr<AcceleratorBackend> open_backend() {
    auto backend = make_hlml_backend();
    Status st = backend->open();
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
    return backend;
  }

  InjectControl inject_{HLML_INJECT_LIB};
  nlohmann::json scenario_ = load_scenario();
};

TEST_F(HlmlBackendTest, NamesItselfAndItsVendor) {
  auto backend = make_hlml_backend();
  EXPECT_EQ(backend->name(), "hlml");
  EXPECT_EQ(backend->vendor(), Vendor::intel_gaudi);
}

TEST_F(HlmlBackendTest, InventoryOfEightGaudi2) {
  auto backend = open_backend();
  EXPECT_EQ(backend->library().path, HLML_INJECT_LIB);
  EXPECT_THAT(backend->library().missing_symbols, IsEmpty());

  auto devices = backend->devices();
  ASSERT_TRUE(devices.ok()) << devices.error().message();
  ASSERT_EQ(devices->size(), 8u);
  for (size_t i = 0; i < devices->size(); ++i) {
    const auto& dev = (*devices)[i];
    const auto& want = scenario_["devices"][i];
    SCOPED_TRACE(dev.pci_bus_id);
    EXPECT_EQ(dev.pci_bus_id, kBusIds[i]);
    EXPECT_EQ(dev.pci_bus_id, want["pci_bus_id"].get<std::string>());
    EXPECT_THAT(dev.peer_links, IsEmpty());
    const AcceleratorInventory& inv = dev.inventory;
    EXPECT_EQ(inv.backend, "hlml");
    EXPECT_EQ(inv.index, i);
    EXPECT_EQ(inv.product_name, "HL-225");
    EXPECT_EQ(inv.memory_total_bytes, 96 * kGiB);
    EXPECT_EQ(inv.driver_version, "1.18.0-ee698fb");
    EXPECT_EQ(inv.uuid, want["uuid"].get<std::string>());
    EXPECT_EQ(inv.serial, want["serial"].get<std::string>());
    ASSERT_TRUE(inv.power_limit_watts.has_value());
    EXPECT_DOUBLE_EQ(*inv.power_limit_watts, 600.0);
    EXPECT_EQ(inv.ecc_enabled, std::optional<bool>(true));
    EXPECT_EQ(inv.ecc_pending, std::optional<bool>(true));
    EXPECT_TRUE(inv.compute_capability.empty());
    EXPECT_FALSE(inv.mig_enabled.has_value());
  }
  EXPECT_EQ((*devices)[7].inventory.serial, "AN23013127");
}

// Every sampled value equals the scenario's, at every step, on every device that answers.
TEST_F(HlmlBackendTest, SamplesFollowTheScenarioStepByStep) {
  auto backend = open_backend();
  const auto& steps = scenario_["steps"];
  ASSERT_EQ(steps.size(), 5u);
  for (unsigned step = 0; step < steps.size(); ++step) {
    inject_.set_step(step);
    for (const auto& bus_id : kBusIds) {
      SCOPED_TRACE("step " + std::to_string(step) + " " + bus_id);
      const auto& want = steps[step]["devices"][bus_id];
      AcceleratorSample s = backend->sample(bus_id);
      EXPECT_EQ(s.pci_bus_id, bus_id);
      if (want.value("lost", false)) {
        EXPECT_FALSE(s.reachable);
        continue;
      }
      ASSERT_TRUE(s.reachable);
      EXPECT_EQ(s.gpu_utilization_percent, want.at("utilization").get<double>());
      EXPECT_EQ(s.memory_used_bytes, want.at("memory_used_bytes").get<std::uint64_t>());
      EXPECT_EQ(s.memory_free_bytes, 96 * kGiB - want.at("memory_used_bytes").get<std::uint64_t>());
      EXPECT_EQ(s.gpu_temperature_c, want.at("temperature_on_aip").get<double>());
      EXPECT_EQ(s.board_temperature_c, want.at("temperature_on_board").get<double>());
      ASSERT_TRUE(s.power_watts.has_value());
      EXPECT_DOUBLE_EQ(*s.power_watts, want.at("power_mw").get<double>() / 1000.0);
      if (bus_id == kNoEnergy) {
        EXPECT_FALSE(s.energy_millijoules.has_value());
      } else {
        EXPECT_EQ(s.energy_millijoules, want.at("energy_mj").get<std::uint64_t>());
      }
      EXPECT_EQ(s.sm_clock_mhz, want.at("clock_soc_mhz").get<std::uint32_t>());
      EXPECT_EQ(s.pcie_replay_count, want.at("pcie_replay_count").get<std::uint64_t>());
      EXPECT_EQ(s.ecc_uncorrected_volatile,
                want.at("ecc_uncorrected_volatile").get<std::uint64_t>());
      EXPECT_EQ(s.ecc_uncorrected_aggregate,
                want.at("ecc_uncorrected_aggregate").get<std::uint64_t>());
      EXPECT_EQ(s.remapped_rows_correctable,
                want.at("replaced_rows_single_bit").get<std::uint64_t>());
      EXPECT_EQ(s.remapped_rows_uncorrectable,
                want.at("replaced_rows_double_bit").get<std::uint64_t>());
      EXPECT_EQ(s.remapped_rows_pending, want.at("replaced_rows_pending").get<bool>());
      EXPECT_EQ(s.throttle_reasons, want.at("throttle_reasons").get<std::uint64_t>());
    }
  }
}

TEST_F(HlmlBackendTest, SampleValuesInTheirUnits) {
  auto backend = open_backend();
  inject_.set_step(1);
  AcceleratorSample s = backend->sample("0000:19:00.0");
  ASSERT_TRUE(s.reachable);
  EXPECT_EQ(s.gpu_utilization_percent, 97.0);
  EXPECT_DOUBLE_EQ(s.power_watts.value_or(0), 539.7);  // 539700 mW
  EXPECT_EQ(s.memory_used_bytes, 96099893248ULL);      // 89.5 GiB
  EXPECT_EQ(s.memory_free_bytes, 6979321856ULL);
  EXPECT_EQ(s.sm_clock_mhz, 1800u);
  EXPECT_THAT(s.throttle_reason_names, IsEmpty());
  EXPECT_LE(std::chrono::system_clock::now() - s.time, 1min);

  inject_.set_step(2);
  AcceleratorSample hot = backend->sample("0000:34:00.0");
  EXPECT_EQ(hot.gpu_temperature_c, 91.0);
  EXPECT_EQ(hot.sm_clock_mhz, 1350u);
  EXPECT_EQ(hot.throttle_reasons, 2u);
  EXPECT_THAT(hot.throttle_reason_names, ElementsAre("hw_thermal_slowdown"));
  AcceleratorSample capped = backend->sample("0000:9a:00.0");
  EXPECT_EQ(capped.throttle_reasons, 1u);
  EXPECT_THAT(capped.throttle_reason_names, ElementsAre("sw_power_cap"));
  AcceleratorSample flaky = backend->sample(kFlaky);
  EXPECT_EQ(flaky.ecc_uncorrected_volatile, 1u);
  EXPECT_EQ(flaky.remapped_rows_pending, std::optional<bool>(true));
}

TEST_F(HlmlBackendTest, UnsupportedFieldsStayEmpty) {
  auto backend = open_backend();
  for (unsigned step : {0u, 1u, 4u}) {
    inject_.set_step(step);
    for (const auto& bus_id : kBusIds) {
      SCOPED_TRACE("step " + std::to_string(step) + " " + bus_id);
      AcceleratorSample s = backend->sample(bus_id);
      ASSERT_TRUE(s.reachable);
      // The scenario's one unsupported field, on one device.
      EXPECT_EQ(s.energy_millijoules.has_value(), bus_id != kNoEnergy);
      // HLML answers HLML_ERROR_NOT_SUPPORTED for corrected ECC counts (hlml.h says so).
      EXPECT_FALSE(s.ecc_corrected_volatile.has_value());
      EXPECT_FALSE(s.ecc_corrected_aggregate.has_value());
      // HLML has no such reading at all.
      EXPECT_FALSE(s.memory_utilization_percent.has_value());
      // This library predates the HBM sensor (it refuses the sensor number), and HLML has no
      // memory clock.
      EXPECT_FALSE(s.memory_temperature_c.has_value());
      EXPECT_FALSE(s.memory_clock_mhz.has_value());
      EXPECT_FALSE(s.retired_pages_single_bit.has_value());
      EXPECT_FALSE(s.retired_pages_double_bit.has_value());
      EXPECT_FALSE(s.remapped_rows_failure.has_value());
      // Supported ones are there.
      EXPECT_TRUE(s.gpu_utilization_percent.has_value());
      EXPECT_TRUE(s.ecc_uncorrected_aggregate.has_value());
    }
  }
}

TEST_F(HlmlBackendTest, CriticalErrorEventArrivesAtItsStep) {
  auto backend = open_backend();
  EXPECT_THAT(backend->poll_events(20ms), IsEmpty());
  inject_.set_step(1);
  EXPECT_THAT(backend->poll_events(20ms), IsEmpty());

  inject_.set_step(2);
  auto events = backend->poll_events(5s);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pci_bus_id, kFlaky);
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::critical);
  EXPECT_EQ(events[0].code, kCriticalErr);
  EXPECT_THAT(events[0].text, HasSubstr("critical"));
  EXPECT_LE(std::chrono::system_clock::now() - events[0].time, 1min);

  // Delivered once.
  EXPECT_THAT(backend->poll_events(20ms), IsEmpty());
  inject_.set_step(3);
  EXPECT_THAT(backend->poll_events(20ms), IsEmpty());
}

TEST_F(HlmlBackendTest, AWaitingPollWakesUpForAnEvent) {
  auto backend = open_backend();
  inject_.set_step(1);
  auto waiting = std::async(std::launch::async, [&] { return backend->poll_events(60s); });
  std::this_thread::sleep_for(100ms);
  inject_.set_step(2);
  auto events = waiting.get();  // the event ends the wait, not the minute
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pci_bus_id, kFlaky);
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::critical);
}

TEST_F(HlmlBackendTest, DeviceThatFallsOffTheBusAndComesBack) {
  auto backend = open_backend();
  inject_.set_step(2);
  EXPECT_TRUE(backend->sample(kFlaky).reachable);

  inject_.set_step(3);
  AcceleratorSample lost = backend->sample(kFlaky);
  EXPECT_EQ(lost.pci_bus_id, kFlaky);
  EXPECT_FALSE(lost.reachable);
  EXPECT_FALSE(lost.gpu_utilization_percent.has_value());
  EXPECT_FALSE(lost.power_watts.has_value());
  for (const auto& bus_id : kBusIds) {
    if (bus_id != kFlaky) {
      EXPECT_TRUE(backend->sample(bus_id).reachable) << bus_id;
    }
  }
  // The inventory still lists it, with what it said while it answered.
  auto devices = backend->devices();
  ASSERT_TRUE(devices.ok()) << devices.error().message();
  ASSERT_EQ(devices->size(), 8u);
  EXPECT_EQ((*devices)[5].pci_bus_id, kFlaky);
  EXPECT_EQ((*devices)[5].inventory.serial, "AN23013048");
  EXPECT_EQ((*devices)[5].inventory.product_name, "HL-225");

  inject_.set_step(4);
  AcceleratorSample back = backend->sample(kFlaky);
  EXPECT_TRUE(back.reachable);
  EXPECT_EQ(back.gpu_utilization_percent, 0.0);
  EXPECT_EQ(back.energy_millijoules, 2929500u);  // restarted with the driver
  EXPECT_EQ(back.ecc_uncorrected_volatile, 0u);
  EXPECT_EQ(back.ecc_uncorrected_aggregate, 1u);
  EXPECT_EQ(back.remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(back.remapped_rows_pending, std::optional<bool>(false));
}

TEST_F(HlmlBackendTest, BusIdsAreNormalisedAndUnknownOnesUnreachable) {
  auto backend = open_backend();
  AcceleratorSample upper = backend->sample("0000:9B:00.0");
  EXPECT_TRUE(upper.reachable);
  EXPECT_EQ(upper.pci_bus_id, kFlaky);
  EXPECT_TRUE(backend->sample("9b:00.0").reachable);

  AcceleratorSample absent = backend->sample("0000:ff:00.0");
  EXPECT_FALSE(absent.reachable);
  EXPECT_FALSE(absent.gpu_utilization_percent.has_value());
  EXPECT_FALSE(backend->sample("not a bus id").reachable);
}

TEST_F(HlmlBackendTest, TwoBackendsShareTheLibrary) {
  auto first = open_backend();
  {
    auto second = open_backend();
    auto devices = second->devices();
    ASSERT_TRUE(devices.ok());
    EXPECT_EQ(devices->size(), 8u);
  }
  // Closing the second did not shut HLML down under the first.
  EXPECT_TRUE(first->sample(kBusIds[0]).reachable);
  auto devices = first->devices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 8u);
}

TEST_F(HlmlBackendTest, MergedIntoTheHostModel) {
  HostModel model;
  std::vector<std::unique_ptr<AcceleratorBackend>> backends;
  backends.push_back(make_hlml_backend());
  auto statuses = merge_accelerators(model, backends);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].name, "hlml");
  EXPECT_TRUE(statuses[0].present) << statuses[0].detail;
  EXPECT_THAT(statuses[0].detail, HasSubstr("8 devices"));
  ASSERT_EQ(model.accelerators.size(), 8u);
  for (size_t i = 0; i < model.accelerators.size(); ++i) {
    const Accelerator& a = model.accelerators[i];
    EXPECT_EQ(a.vendor, Vendor::intel_gaudi);
    EXPECT_EQ(a.pci.address.to_string(), kBusIds[i]);
    EXPECT_EQ(a.name, "HL-225");
    ASSERT_TRUE(a.inventory.has_value());
    EXPECT_EQ(a.inventory->backend, "hlml");
  }
}

TEST_F(HlmlBackendTest, PartialLibraryWorksWithWhatItHas) {
  use_library(HLML_INJECT_PARTIAL_LIB, scenario_path());
  InjectControl partial(HLML_INJECT_PARTIAL_LIB);
  ASSERT_TRUE(partial.ok());
  auto backend = make_hlml_backend();
  Status st = backend->open();
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(backend->library().path, HLML_INJECT_PARTIAL_LIB);
  const std::vector<std::string> absent = {
      "hlml_get_driver_version",
      "hlml_device_get_handle_by_pci_bus_id",
      "hlml_device_get_uuid",
      "hlml_device_get_serial",
      "hlml_device_get_power_management_default_limit",
      "hlml_device_get_ecc_mode",
      "hlml_device_get_pcie_replay_counter",
      "hlml_device_get_total_ecc_errors",
      "hlml_device_get_replaced_rows",
      "hlml_device_get_replaced_rows_pending_status",
      "hlml_device_get_current_clocks_throttle_reasons",
      "hlml_device_get_max_clock_info",
      "hlml_device_get_temperature_threshold",
      "hlml_device_get_pcie_throughput",
      "hlml_device_get_curr_pcie_link_generation",
      "hlml_device_get_curr_pcie_link_width",
      "hlml_nic_get_link",
      "hlml_event_set_create",
      "hlml_event_set_free",
      "hlml_device_register_events",
      "hlml_event_set_wait",
  };
  EXPECT_THAT(backend->library().missing_symbols, UnorderedElementsAreArray(absent));

  auto devices = backend->devices();
  ASSERT_TRUE(devices.ok()) << devices.error().message();
  ASSERT_EQ(devices->size(), 8u);
  for (const auto& dev : *devices) {
    SCOPED_TRACE(dev.pci_bus_id);
    EXPECT_EQ(dev.inventory.product_name, "HL-225");
    EXPECT_EQ(dev.inventory.memory_total_bytes, 96 * kGiB);
    EXPECT_TRUE(dev.inventory.uuid.empty());
    EXPECT_TRUE(dev.inventory.serial.empty());
    EXPECT_TRUE(dev.inventory.driver_version.empty());
    EXPECT_FALSE(dev.inventory.power_limit_watts.has_value());
    EXPECT_FALSE(dev.inventory.ecc_enabled.has_value());
  }

  partial.set_step(1);
  AcceleratorSample s = backend->sample("0000:19:00.0");
  EXPECT_TRUE(s.reachable);
  EXPECT_EQ(s.gpu_utilization_percent, 97.0);
  EXPECT_EQ(s.memory_used_bytes, 96099893248ULL);
  EXPECT_EQ(s.gpu_temperature_c, 50.0);
  EXPECT_DOUBLE_EQ(s.power_watts.value_or(0), 539.7);
  EXPECT_TRUE(s.energy_millijoules.has_value());
  EXPECT_EQ(s.sm_clock_mhz, 1800u);
  EXPECT_FALSE(s.pcie_replay_count.has_value());
  EXPECT_FALSE(s.ecc_uncorrected_volatile.has_value());
  EXPECT_FALSE(s.remapped_rows_uncorrectable.has_value());
  EXPECT_FALSE(s.remapped_rows_pending.has_value());
  EXPECT_FALSE(s.throttle_reasons.has_value());

  // No events from this library: an empty answer, even at the critical error's step.
  partial.set_step(2);
  EXPECT_THAT(backend->poll_events(20ms), IsEmpty());

  // A lost device is still noticed, and its return (no lookup by bus id to help).
  partial.set_step(3);
  EXPECT_FALSE(backend->sample(kFlaky).reachable);
  EXPECT_TRUE(backend->sample("0000:19:00.0").reachable);
  partial.set_step(4);
  EXPECT_TRUE(backend->sample(kFlaky).reachable);
}

class HlmlBackendFailureTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("POLYACCEL_HLML_LIB");
    ::unsetenv("HLML_INJECT_SCENARIO");
  }
  // A backend whose open() failed still answers every call without crashing.
  static void expect_inert(AcceleratorBackend& backend) {
    auto devices = backend.devices();
    EXPECT_FALSE(devices.ok());
    EXPECT_FALSE(backend.sample("0000:19:00.0").reachable);
    EXPECT_THAT(backend.poll_events(0ms), IsEmpty());
  }
  testing::TempDir tmp_;
};

TEST_F(HlmlBackendFailureTest, PathThatIsNotALibrary) {
  const auto path = tmp_.path() / "libhlml.so";
  std::ofstream(path) << "this is a text file, not an ELF shared object\n";
  use_library(path.string(), scenario_path());
  auto backend = make_hlml_backend();
  Status st = backend->open();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::bad_input);
  EXPECT_EQ(st.error().input, path.string());
  EXPECT_THAT(st.error().message(), HasSubstr("not a loadable HLML library"));
  expect_inert(*backend);
}

TEST_F(HlmlBackendFailureTest, LibraryWithoutHlmlInit) {
  use_library("libm.so.6", scenario_path());  // a real library, just not HLML
  auto backend = make_hlml_backend();
  Status st = backend->open();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::bad_input);
  EXPECT_THAT(st.error().message(), HasSubstr("hlml_init"));
  EXPECT_THAT(backend->library().missing_symbols, ::testing::Contains("hlml_init"));
  expect_inert(*backend);
}

TEST_F(HlmlBackendFailureTest, InitErrorFromTheLibrary) {
  const auto scenario = tmp_.path() / "no-driver.json";
  std::ofstream(scenario) << R"({"init_error": "HLML_ERROR_DRIVER_NOT_LOADED", "devices": []})";
  use_library(HLML_INJECT_LIB, scenario.string());
  auto backend = make_hlml_backend();
  Status st = backend->open();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().code, ErrorCode::not_found);
  EXPECT_EQ(st.error().input, HLML_INJECT_LIB);
  EXPECT_THAT(st.error().problem, HasSubstr("hlml_init failed: HLML_ERROR_DRIVER_NOT_LOADED (9)"));
  EXPECT_THAT(st.error().remedy, HasSubstr("modprobe habanalabs"));
  expect_inert(*backend);

  // A later open with a working library succeeds: nothing was left half-initialised.
  use_library(HLML_INJECT_LIB, scenario_path());
  Status again = backend->open();
  ASSERT_TRUE(again.ok()) << again.error().message();
  auto devices = backend->devices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 8u);
}

TEST_F(HlmlBackendFailureTest, BrokenScenarioIsAnInitError) {
  const auto scenario = tmp_.path() / "broken.json";
  std::ofstream(scenario) << R"({"devices": [ {"pci_bus_id": )";
  use_library(HLML_INJECT_LIB, scenario.string());
  auto backend = make_hlml_backend();
  Status st = backend->open();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message(), HasSubstr("HLML_ERROR_UNKNOWN"));
}

TEST_F(HlmlBackendFailureTest, NoLibraryAtAll) {
  use_library((tmp_.path() / "nowhere" / "libhlml.so").string(), scenario_path());
  auto backend = make_hlml_backend();
  Status st = backend->open();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::not_found);
  expect_inert(*backend);

  // The rest of polyaccel goes on: the merge reports the backend absent and changes nothing.
  HostModel model;
  std::vector<std::unique_ptr<AcceleratorBackend>> backends;
  backends.push_back(make_hlml_backend());
  auto statuses = merge_accelerators(model, backends);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_FALSE(statuses[0].present);
  EXPECT_THAT(statuses[0].detail, HasSubstr("absent"));
  EXPECT_THAT(model.accelerators, IsEmpty());
}

// A library with the HBM sensor (HLML_TEMPERATURE_HBM) gives the memory temperature; one
// device there supports it only at the second step (it answers "not supported" before).
TEST_F(HlmlBackendFailureTest, HbmSensorOfANewerLibrary) {
  const auto scenario = tmp_.path() / "gaudi3.json";
  std::ofstream(scenario) << R"({"driver_version": "1.21.0", "devices": [
      {"pci_bus_id": "0000:19:00.0", "pci_device_id": "1060", "name": "HL-325L"},
      {"pci_bus_id": "0000:1a:00.0", "pci_device_id": "1060", "name": "HL-325L",
       "unsupported": ["temperature_hbm"]}],
    "steps": [{"devices": {
      "0000:19:00.0": {"temperature_on_aip": 41, "temperature_on_board": 33, "temperature_hbm": 47},
      "0000:1a:00.0": {"temperature_on_aip": 40, "temperature_on_board": 32}}}]})";
  use_library(HLML_INJECT_LIB, scenario.string());
  auto backend = make_hlml_backend();
  Status st = backend->open();
  ASSERT_TRUE(st.ok()) << st.error().message();
  AcceleratorSample s = backend->sample("0000:19:00.0");
  EXPECT_TRUE(s.reachable);
  EXPECT_EQ(s.gpu_temperature_c, 41.0);
  EXPECT_EQ(s.board_temperature_c, 33.0);
  EXPECT_EQ(s.memory_temperature_c, 47.0);
  AcceleratorSample other = backend->sample("0000:1a:00.0");
  EXPECT_TRUE(other.reachable);
  EXPECT_EQ(other.board_temperature_c, 32.0);
  EXPECT_FALSE(other.memory_temperature_c.has_value());
}

// Both struct layouts HLML has shipped (hlml_abi.h): the older gohlml one (hlml_pci_info_t 52
// bytes, hlml_utilization_t 4) and the current one (84 and 8, with the memory utilization).
// The backend tells them apart by what the library writes and reads each by its own offsets.
std::string layout_scenario(const std::string& layout) {
  return R"({"driver_version": "1.21.0", "layout": ")" + layout + R"(", "devices": [
      {"pci_bus_id": "0000:19:00.0", "pci_device_id": "1060", "pci_rev": "1",
       "pci_subsys_id": "10601da3", "name": "HL-325L"},
      {"pci_bus_id": "0000:B3:00.0", "pci_device_id": "1060", "name": "HL-325L"}],
    "steps": [{"devices": {
      "0000:19:00.0": {"utilization": 87, "memory_utilization": 42},
      "0000:B3:00.0": {"utilization": 13, "memory_utilization": 7}}}]})";
}

TEST_F(HlmlBackendFailureTest, BothStructLayoutsAreReadRight) {
  for (const std::string layout : {"gohlml-v1.16", "current"}) {
    SCOPED_TRACE(layout);
    const auto scenario = tmp_.path() / (layout + ".json");
    std::ofstream(scenario) << layout_scenario(layout);
    use_library(HLML_INJECT_LIB, scenario.string());
    auto backend = make_hlml_backend();
    Status st = backend->open();
    ASSERT_TRUE(st.ok()) << st.error().message();
    EXPECT_THAT(backend->library().note,
                HasSubstr(layout == "current" ? "current (hlml_pci_info_t 84 bytes"
                                              : "gohlml v1.16 (hlml_pci_info_t 52 bytes"));
    auto devices = backend->devices();
    ASSERT_TRUE(devices.ok()) << devices.error().message();
    ASSERT_EQ(devices->size(), 2u);
    EXPECT_EQ((*devices)[0].pci_bus_id, "0000:19:00.0");
    EXPECT_EQ((*devices)[1].pci_bus_id, "0000:b3:00.0");
    EXPECT_EQ((*devices)[0].inventory.product_name, "HL-325L");

    AcceleratorSample s = backend->sample("0000:19:00.0");
    EXPECT_TRUE(s.reachable);
    EXPECT_EQ(s.gpu_utilization_percent, 87.0);
    AcceleratorSample other = backend->sample("0000:b3:00.0");
    EXPECT_EQ(other.gpu_utilization_percent, 13.0);
    if (layout == "current") {
      EXPECT_EQ(s.memory_utilization_percent, 42.0);
      EXPECT_EQ(other.memory_utilization_percent, 7.0);
    } else {
      // The older layout has no memory utilization: nothing is read past its 4 bytes.
      EXPECT_FALSE(s.memory_utilization_percent.has_value());
      EXPECT_FALSE(other.memory_utilization_percent.has_value());
    }
  }
}

// The test library writes exactly the bytes of the layout it plays, no more (so the backend's
// buffers, sized for the larger layout, are never overrun by either), and all of them.
TEST_F(HlmlBackendFailureTest, TestLibraryWritesExactlyItsLayout) {
  struct Layout {
    std::string name;
    size_t pci_info_size;
    size_t utilization_size;
  };
  for (const Layout& layout : {Layout{"gohlml-v1.16", 52, 4}, Layout{"current", 84, 8}}) {
    SCOPED_TRACE(layout.name);
    const auto scenario = tmp_.path() / (layout.name + "-raw.json");
    std::ofstream(scenario) << layout_scenario(layout.name);
    use_library(HLML_INJECT_LIB, scenario.string());
    void* lib = ::dlopen(HLML_INJECT_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << ::dlerror();
    auto init = reinterpret_cast<int (*)()>(::dlsym(lib, "hlml_init"));
    auto shutdown = reinterpret_cast<int (*)()>(::dlsym(lib, "hlml_shutdown"));
    auto handle_by_index = reinterpret_cast<int (*)(unsigned, void**)>(
        ::dlsym(lib, "hlml_device_get_handle_by_index"));
    auto pci_info =
        reinterpret_cast<int (*)(void*, void*)>(::dlsym(lib, "hlml_device_get_pci_info"));
    auto utilization =
        reinterpret_cast<int (*)(void*, void*)>(::dlsym(lib, "hlml_device_get_utilization_rates"));
    ASSERT_TRUE(init && shutdown && handle_by_index && pci_info && utilization);
    ASSERT_EQ(init(), 0);
    void* device = nullptr;
    ASSERT_EQ(handle_by_index(0, &device), 0);

    // The footprint of one call: which bytes of a 256-byte buffer it wrote.
    auto footprint = [&](int (*fn)(void*, void*)) {
      std::vector<unsigned char> zeros(256, 0x00), ones(256, 0xff);
      EXPECT_EQ(fn(device, zeros.data()), 0);
      EXPECT_EQ(fn(device, ones.data()), 0);
      size_t last_written = 0;
      for (size_t i = 0; i < zeros.size(); ++i) {
        if (zeros[i] == ones[i]) last_written = i + 1;
      }
      return last_written;
    };
    EXPECT_EQ(footprint(pci_info), layout.pci_info_size);
    EXPECT_EQ(footprint(utilization), layout.utilization_size);
    EXPECT_EQ(shutdown(), 0);
    ::dlclose(lib);
  }
}

TEST_F(HlmlBackendFailureTest, DefaultLibraryNameOnAHostWithoutGaudi) {
  ::unsetenv("POLYACCEL_HLML_LIB");
  if (void* real = ::dlopen("libhlml.so", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(real);
    GTEST_SKIP() << "this host has a libhlml.so";
  }
  auto backend = make_hlml_backend();
  Status st = backend->open();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::not_found);
  EXPECT_EQ(backend->library().path, "libhlml.so");
}

}  // namespace
}  // namespace polyaccel
