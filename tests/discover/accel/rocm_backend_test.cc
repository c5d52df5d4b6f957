// The rocm-smi backend through its production loader, against our test build of
// librocm_smi64.so.1 (tests/inject/rocm_smi) fed by scenario files: POLYACCEL_ROCM_SMI_LIB names
// the built library, ROCM_SMI_INJECT_SCENARIO the scenario. ctest runs each case in its own
// process, so setting the environment here is safe.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "discover/accel/backends.h"
#include "support/inject_steps.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

const std::string kLibrary = ROCM_SMI_INJECT_LIB;
const std::string kPartialLibrary = ROCM_SMI_INJECT_PARTIAL_LIB;
const std::filesystem::path kMi300x =
    std::filesystem::path(ROCM_SMI_SCENARIO_DIR) / "mi300x-8x.json";

using polyaccel::testing::kMi300xBusIds;
constexpr std::uint64_t kVram = 192ULL << 30;
constexpr std::uint64_t kIdleVramUsed = 297795584;
constexpr float kEnergyResolutionUj = 15.259f;  // the scenario's, as the library's float

// What the scenario's energy counter gives in millijoules.
double millijoules(std::uint64_t counter) {
  return static_cast<double>(static_cast<long double>(counter) * kEnergyResolutionUj / 1000.0L);
}

std::unique_ptr<AcceleratorBackend> backend_for(const std::string& library,
                                                const std::filesystem::path& scenario) {
  ::setenv("POLYACCEL_ROCM_SMI_LIB", library.c_str(), 1);
  ::setenv("ROCM_SMI_INJECT_SCENARIO", scenario.c_str(), 1);
  return make_rocm_smi_backend();
}

std::filesystem::path write_scenario(const testing::TempDir& dir, const nlohmann::json& j) {
  auto path = dir.path() / "scenario.json";
  std::ofstream(path) << j.dump(2);
  return path;
}

using Steps = testing::InjectSteps;

class RocmMi300xTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = backend_for(kLibrary, kMi300x);
    Status opened = backend_->open();
    ASSERT_TRUE(opened) << opened.error().message();
    steps_ = std::make_unique<Steps>(kLibrary);
    ASSERT_TRUE(steps_->ok());
  }

  std::unique_ptr<AcceleratorBackend> backend_;
  std::unique_ptr<Steps> steps_;
};

TEST_F(RocmMi300xTest, NamesItself) {
  EXPECT_EQ(backend_->name(), "rocm-smi");
  EXPECT_EQ(backend_->vendor(), Vendor::amd);
  EXPECT_EQ(backend_->library().path, kLibrary);
  EXPECT_TRUE(backend_->library().missing_symbols.empty())
      << ::testing::PrintToString(backend_->library().missing_symbols);
}

TEST_F(RocmMi300xTest, Inventory) {
  auto devices = backend_->devices();
  ASSERT_TRUE(devices) << devices.error().message();
  ASSERT_EQ(devices->size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const auto& d = (*devices)[i];
    SCOPED_TRACE(d.pci_bus_id);
    EXPECT_EQ(d.pci_bus_id, kMi300xBusIds[i]);
    const AcceleratorInventory& inv = d.inventory;
    EXPECT_EQ(inv.backend, "rocm-smi");
    EXPECT_EQ(inv.index, i);
    EXPECT_EQ(inv.product_name, "AMD Instinct MI300X");
    EXPECT_EQ(inv.memory_total_bytes, kVram);
    EXPECT_EQ(inv.driver_version, "6.8.5");
    EXPECT_EQ(inv.gfx_version, "gfx942");
    EXPECT_EQ(inv.compute_partition, "SPX");
    EXPECT_EQ(inv.memory_partition, "NPS1");
    EXPECT_EQ(inv.power_limit_watts, std::optional<double>(750.0));
    EXPECT_EQ(inv.ecc_enabled, std::optional<bool>(true));
    EXPECT_FALSE(inv.ecc_pending);
    EXPECT_FALSE(inv.mig_enabled);
    EXPECT_TRUE(inv.compute_capability.empty());
    EXPECT_EQ(inv.serial.rfind("PCB052", 0), 0u) << inv.serial;
  }
  EXPECT_EQ((*devices)[0].inventory.uuid, "GPU-8a3c1f52d07e4b19");
  EXPECT_EQ((*devices)[7].inventory.uuid, "GPU-9c6b2e07d3f1a858");
  EXPECT_EQ((*devices)[0].inventory.serial, "PCB05214210");
}

TEST_F(RocmMi300xTest, IdleSample) {
  AcceleratorSample s = backend_->sample("0000:05:00.0");
  EXPECT_EQ(s.pci_bus_id, "0000:05:00.0");
  EXPECT_TRUE(s.reachable);
  EXPECT_EQ(s.gpu_utilization_percent, std::optional<double>(0));
  EXPECT_EQ(s.memory_utilization_percent, std::optional<double>(0));
  EXPECT_EQ(s.memory_used_bytes, std::optional<std::uint64_t>(kIdleVramUsed));
  EXPECT_EQ(s.memory_free_bytes, std::optional<std::uint64_t>(kVram - kIdleVramUsed));
  // MI300X has no edge sensor: the junction stands in.
  EXPECT_EQ(s.gpu_temperature_c, std::optional<double>(41.0));
  EXPECT_EQ(s.memory_temperature_c, std::optional<double>(35.0));
  // Nor an average power: the current socket power stands in.
  EXPECT_EQ(s.power_watts, std::optional<double>(131.0));
  ASSERT_TRUE(s.energy_millijoules);
  EXPECT_NEAR(static_cast<double>(*s.energy_millijoules), millijoules(101234567890ULL), 1.0);
  EXPECT_EQ(s.sm_clock_mhz, std::optional<std::uint32_t>(132));
  EXPECT_EQ(s.memory_clock_mhz, std::optional<std::uint32_t>(900));
  EXPECT_EQ(s.pcie_replay_count, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.ecc_corrected_volatile, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.ecc_uncorrected_volatile, std::optional<std::uint64_t>(0));
}

TEST_F(RocmMi300xTest, SamplesFollowTheSteps) {
  steps_->go(1);
  for (size_t i = 0; i < 8; ++i) {
    SCOPED_TRACE(kMi300xBusIds[i]);
    AcceleratorSample s = backend_->sample(kMi300xBusIds[i]);
    EXPECT_TRUE(s.reachable);
    EXPECT_EQ(s.gpu_utilization_percent, std::optional<double>(98));
    EXPECT_EQ(s.memory_utilization_percent, std::optional<double>(61));
    EXPECT_EQ(s.memory_used_bytes, std::optional<std::uint64_t>(183609851904ULL));
    EXPECT_EQ(s.gpu_temperature_c, std::optional<double>(76.0 + static_cast<double>(i)));
    EXPECT_EQ(s.power_watts, std::optional<double>(690.0 + 3.0 * static_cast<double>(i)));
    EXPECT_EQ(s.sm_clock_mhz, std::optional<std::uint32_t>(2100));
    EXPECT_EQ(s.memory_clock_mhz, std::optional<std::uint32_t>(1300));
  }
  EXPECT_EQ(backend_->sample("0000:65:00.0").ecc_corrected_volatile,
            std::optional<std::uint64_t>(2));
  EXPECT_EQ(backend_->sample("0000:85:00.0").pcie_replay_count, std::optional<std::uint64_t>(3));
  AcceleratorSample s = backend_->sample("0000:05:00.0");
  ASSERT_TRUE(s.energy_millijoules);
  EXPECT_NEAR(static_cast<double>(*s.energy_millijoules),
              millijoules(101234567890ULL + 2800000000ULL), 1.0);

  steps_->go(2);
  AcceleratorSample a6 = backend_->sample("0000:a6:00.0");
  EXPECT_EQ(a6.ecc_uncorrected_volatile, std::optional<std::uint64_t>(1));
  EXPECT_EQ(a6.gpu_utilization_percent, std::optional<double>(0));
  // The uncorrectable error left a bad page, retired at the reset.
  EXPECT_EQ(a6.bad_pages_pending, std::optional<std::uint64_t>(1));
  EXPECT_EQ(a6.bad_pages_retired, std::optional<std::uint64_t>(0));
  steps_->go(3);
  a6 = backend_->sample("0000:a6:00.0");
  EXPECT_EQ(a6.bad_pages_pending, std::optional<std::uint64_t>(0));
  EXPECT_EQ(a6.bad_pages_retired, std::optional<std::uint64_t>(1));
}

TEST_F(RocmMi300xTest, UnsupportedFieldsStayEmpty) {
  // 0000:c6:00.0 has no memory temperature sensor; the others do.
  AcceleratorSample c6 = backend_->sample("0000:c6:00.0");
  EXPECT_TRUE(c6.reachable);
  EXPECT_FALSE(c6.memory_temperature_c);
  EXPECT_TRUE(c6.gpu_temperature_c);
  EXPECT_TRUE(backend_->sample("0000:e5:00.0").memory_temperature_c);
  for (const auto& id : kMi300xBusIds) {
    AcceleratorSample s = backend_->sample(id);
    // What rocm_smi has no call for is never filled: AMD keeps no lifetime ECC counts, and
    // retires pages (bad_pages_*) rather than NVIDIA-style pages or rows.
    EXPECT_FALSE(s.ecc_corrected_aggregate);
    EXPECT_FALSE(s.ecc_uncorrected_aggregate);
    EXPECT_FALSE(s.retired_pages_double_bit);
    EXPECT_FALSE(s.remapped_rows_pending);
    // MI300's metrics table says "not available" for the throttle bits.
    EXPECT_FALSE(s.throttle_reasons);
    EXPECT_TRUE(s.throttle_reason_names.empty());
  }
}

// A device whose calls answer "not supported" after answering before is gone too: rocm_smi
// reports a vanished sysfs file that way.
TEST(RocmBackend, DeviceWhoseFieldsTurnUnsupportedIsUnreachable) {
  testing::TempDir dir;
  auto scenario = write_scenario(
      dir, {
               {"devices", {{{"pci_bus_id", "0000:05:00.0"}, {"name", "AMD Instinct MI300X"}}}},
               {"steps",
                {{{"all", {{"busy_percent", 5}, {"temperature_junction_c", 40.0}}}},
                 {{"all", {{"lost", "NOT_SUPPORTED"}}}},
                 {{"all", {{"lost", false}}}}}},
           });
  auto backend = backend_for(kLibrary, scenario);
  ASSERT_TRUE(backend->open());
  Steps steps(kLibrary);
  ASSERT_TRUE(steps.ok());
  EXPECT_TRUE(backend->sample("0000:05:00.0").reachable);
  steps.go(1);
  EXPECT_FALSE(backend->sample("0000:05:00.0").reachable);
  steps.go(2);
  EXPECT_TRUE(backend->sample("0000:05:00.0").reachable);
}

// A device that supports nothing is reachable, with every field empty.
TEST(RocmBackend, DeviceThatSupportsNothingIsReachable) {
  testing::TempDir dir;
  auto scenario = write_scenario(dir, {{"devices", {{{"pci_bus_id", "0000:05:00.0"}}}}});
  auto backend = backend_for(kLibrary, scenario);
  ASSERT_TRUE(backend->open());
  AcceleratorSample s = backend->sample("0000:05:00.0");
  EXPECT_TRUE(s.reachable);
  EXPECT_FALSE(s.gpu_utilization_percent);
  EXPECT_FALSE(s.sm_clock_mhz);
  EXPECT_FALSE(s.ecc_corrected_volatile);
}

// rocm_smi_lib 5.x and 6.x and later lay out rsmi_frequencies_t differently, and 7.8 writes
// 96-byte event messages where every earlier release writes 64 (rsmi_error_count_t is 16 bytes
// in all); the backend reads each, several events at a time.
class RocmLibraryVersionTest : public ::testing::TestWithParam<std::string> {};

// MI200: the edge sensor on its own and each HBM stack, next to the memory sensor (which stays the
// memory temperature); a stack the library answers 0 for is not there.
TEST(RocmSmiBackend, EdgeAndHbmStacksOfAnMi250x) {
  testing::TempDir dir;
  auto scenario = write_scenario(dir, {{"devices",
                                        {{{"pci_bus_id", "0000:c1:00.0"},
                                          {"name", "AMD Instinct MI250X"},
                                          {"gfx_version", "gfx90a"}},
                                         {{"pci_bus_id", "0000:c6:00.0"},
                                          {"name", "AMD Instinct MI250X"},
                                          {"gfx_version", "gfx90a"},
                                          {"unsupported", {"temperature_memory"}}}}},
                                       {"steps",
                                        {{{"all",
                                           {{"temperature_edge_c", 44.0},
                                            {"temperature_junction_c", 58.0},
                                            {"temperature_memory_c", 49.0},
                                            {"temperature_hbm_c", {46.0, 48.5, 0.0, 45.0}},
                                            {"power_average_watts", 482.0}}}}}}});
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  ASSERT_TRUE(backend->devices());
  AcceleratorSample s = backend->sample("0000:c1:00.0");
  EXPECT_EQ(s.edge_temperature_c, std::optional<double>(44.0));
  EXPECT_EQ(s.memory_temperature_c, std::optional<double>(49.0));
  EXPECT_THAT(s.hbm_temperature_c, ::testing::ElementsAre(std::pair<unsigned, double>{0, 46.0},
                                                          std::pair<unsigned, double>{1, 48.5},
                                                          std::pair<unsigned, double>{3, 45.0}));
  EXPECT_EQ(s.average_power_watts, std::optional<double>(482.0));
  // Without a memory sensor the hottest stack stands in.
  EXPECT_EQ(backend->sample("0000:c6:00.0").memory_temperature_c, std::optional<double>(48.5));
}

TEST_P(RocmLibraryVersionTest, ReadsTheLayoutsOfThisVersion) {
  testing::TempDir dir;
  auto scenario = write_scenario(
      dir,
      {
          {"library_version", GetParam()},
          {"driver_version", "5.16.9.22.20"},
          {"devices",
           {{{"pci_bus_id", "0001:c3:00.0"},
             {"name", "AMD Instinct MI250X"},
             {"gfx_version", "gfx90a"},
             {"ecc_enabled_blocks", {"umc", "gfx"}},
             {"sclk_range_mhz", {500, 1700}},
             {"mclk_range_mhz", {400, 1600}}},
            {{"pci_bus_id", "0001:c6:00.0"}, {"name", "AMD Instinct MI250X"}}}},
          {"steps",
           {{{"all",
              {{"sclk_mhz", 1700},
               {"mclk_mhz", 1600},
               {"power_average_watts", 480.5},
               {"temperature_edge_c", 55.0},
               {"indep_throttle_status", (1ULL << 0) | (1ULL << 36)},
               {"ecc",
                {{"umc", {{"correctable", 4}, {"uncorrectable", 1}}},
                 {"gfx", {{"correctable", 3}, {"uncorrectable", 0}}}}}}}},
            {{"events",
              {{{"device", "0001:c3:00.0"}, {"type", "gpu_pre_reset"}, {"message", "first"}},
               {{"device", "0001:c6:00.0"}, {"type", "thermal_throttle"}},
               {{"device", "0001:c3:00.0"}, {"type", "gpu_post_reset"}, {"message", "second"}}}}}}},
      });
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  auto devices = backend->devices();
  ASSERT_TRUE(devices);
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].pci_bus_id, "0001:c3:00.0");
  EXPECT_EQ((*devices)[0].inventory.gfx_version, "gfx90a");
  EXPECT_EQ((*devices)[0].inventory.driver_version, "5.16.9.22.20");

  AcceleratorSample s = backend->sample("0001:c3:00.0");
  EXPECT_EQ(s.sm_clock_mhz, std::optional<std::uint32_t>(1700));
  EXPECT_EQ(s.memory_clock_mhz, std::optional<std::uint32_t>(1600));
  EXPECT_EQ(s.power_watts, std::optional<double>(480.5));
  EXPECT_EQ(s.gpu_temperature_c, std::optional<double>(55.0));
  EXPECT_EQ(s.ecc_corrected_volatile, std::optional<std::uint64_t>(7));
  EXPECT_EQ(s.ecc_uncorrected_volatile, std::optional<std::uint64_t>(1));
  // MI250X fills the metrics table's independent throttle bits.
  EXPECT_EQ(s.throttle_reasons, std::optional<std::uint64_t>((1ULL << 0) | (1ULL << 36)));
  EXPECT_THAT(s.throttle_reason_names, ::testing::ElementsAre("ppt0", "temp_hotspot"));

  Steps steps(kLibrary);
  ASSERT_TRUE(steps.ok());
  steps.go(1);
  auto events = backend->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].pci_bus_id, "0001:c3:00.0");
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::critical);
  EXPECT_THAT(events[0].text, HasSubstr("first"));
  EXPECT_EQ(events[1].pci_bus_id, "0001:c6:00.0");
  EXPECT_EQ(events[1].code, 2u);
  EXPECT_EQ(events[2].code, 4u);
  EXPECT_THAT(events[2].text, HasSubstr("second"));
}

INSTANTIATE_TEST_SUITE_P(RocmBackend, RocmLibraryVersionTest,
                         ::testing::Values("5.2.3", "6.0.0", "7.3.0", "7.8.0"));

// Which message size a library uses is not certain from its version alone (versions 7.4 to 7.7
// were not seen): the stride of the event array is told from the entries when the version's one
// makes no sense, both ways.
class RocmEventStrideTest : public ::testing::TestWithParam<std::pair<std::string, unsigned>> {};

TEST_P(RocmEventStrideTest, EventStrideToldFromTheEntries) {
  testing::TempDir dir;
  nlohmann::json event = {{"device", "0000:05:00.0"}, {"type", "gpu_pre_reset"}};
  auto scenario = write_scenario(
      dir, {{"library_version", GetParam().first},
            {"event_message_size", GetParam().second},
            {"devices", {{{"pci_bus_id", "0000:05:00.0"}}, {{"pci_bus_id", "0000:26:00.0"}}}},
            {"steps",
             {{{"events",
                {event,
                 {{"device", "0000:26:00.0"}, {"type", "gpu_post_reset"}, {"message", "done"}},
                 event}}}}}});
  auto backend = backend_for(kLibrary, scenario);
  ASSERT_TRUE(backend->open());
  auto events = backend->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:05:00.0");
  EXPECT_EQ(events[0].code, 3u);
  EXPECT_EQ(events[1].pci_bus_id, "0000:26:00.0");
  EXPECT_EQ(events[1].code, 4u);
  EXPECT_THAT(events[1].text, HasSubstr("done"));
  EXPECT_EQ(events[2].code, 3u);
}

// A 7.8 library that writes 64-byte messages, a 7.3 one that writes 96-byte ones.
INSTANTIATE_TEST_SUITE_P(RocmBackend, RocmEventStrideTest,
                         ::testing::Values(std::pair<std::string, unsigned>{"7.8.0", 64},
                                           std::pair<std::string, unsigned>{"7.3.0", 96}));

// In a compute partition mode the library shows one index per partition, each on a function of
// the GPU's PCI device that does not exist on the bus (rocm_smi_lib#208): one GPU, function 0.
TEST(RocmBackend, PartitionsOfOneGpuAreOneDevice) {
  testing::TempDir dir;
  auto partition = [](const char* bus_id) {
    return nlohmann::json{{"pci_bus_id", bus_id},
                          {"name", "AMD Instinct MI300X"},
                          {"compute_partition", "CPX"},
                          {"memory_partition", "NPS4"}};
  };
  auto scenario = write_scenario(
      dir, {{"devices",
             {partition("0000:05:00.0"),
              partition("0000:05:00.1"),
              partition("0000:05:00.2"),
              partition("0000:05:00.3"),
              {{"pci_bus_id", "0000:26:00.0"}, {"compute_partition", "SPX"}}}},
            {"steps",
             {nlohmann::json::object(),
              {{"events", {{{"device", "0000:05:00.2"}, {"type", "gpu_pre_reset"}}}}}}}});
  auto backend = backend_for(kLibrary, scenario);
  ASSERT_TRUE(backend->open());
  auto devices = backend->devices();
  ASSERT_TRUE(devices);
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].pci_bus_id, "0000:05:00.0");
  EXPECT_EQ((*devices)[0].inventory.index, 0u);
  EXPECT_EQ((*devices)[0].inventory.compute_partition, "CPX");
  EXPECT_EQ((*devices)[0].inventory.memory_partition, "NPS4");
  EXPECT_EQ((*devices)[0].partitions, 4u);
  EXPECT_EQ((*devices)[1].partitions, 1u);
  EXPECT_EQ((*devices)[1].pci_bus_id, "0000:26:00.0");
  EXPECT_EQ((*devices)[1].inventory.index, 4u);
  EXPECT_FALSE(backend->sample("0000:05:00.2").reachable);  // no such function
  EXPECT_TRUE(backend->sample("0000:05:00.0").reachable);
  // An event of a partition is an event of its GPU.
  Steps steps(kLibrary);
  ASSERT_TRUE(steps.ok());
  steps.go(1);
  auto events = backend->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:05:00.0");
}

// The further partitions of a GPU in DPX through their own device indices, as the amd-smi
// backend samples them: partition 1 with its own activity and memory; what belongs to the GPU
// (power, temperatures, PCIe, ECC) on the GPU's sample only.
TEST(RocmBackend, EachPartitionIsSampled) {
  constexpr std::uint64_t kGiB = 1ULL << 30;
  auto backend =
      backend_for(kLibrary, std::filesystem::path(ROCM_SMI_SCENARIO_DIR) / "mi300x-2x-dpx.json");
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  auto devices = backend->devices();
  ASSERT_TRUE(devices);
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].partitions, 2u);
  AcceleratorSample dpx = backend->sample("0000:05:00.0");
  ASSERT_TRUE(dpx.reachable);
  EXPECT_EQ(dpx.gpu_utilization_percent, 72.0);
  EXPECT_EQ(dpx.memory_used_bytes, 64 * kGiB);
  ASSERT_EQ(dpx.partitions.size(), 1u);
  const PartitionSample& second = dpx.partitions[0];
  EXPECT_EQ(second.partition_id, 1u);
  EXPECT_EQ(second.index, 1u);
  EXPECT_EQ(second.gpu_utilization_percent, 18.0);
  EXPECT_EQ(second.memory_utilization_percent, 9.0);
  EXPECT_EQ(second.memory_used_bytes, 8 * kGiB);
  EXPECT_EQ(second.memory_total_bytes, 96 * kGiB);
  // Each partition's own XCCs from the GPU's metrics table: an MI300X's 8 are 4 per partition in
  // DPX, xcp_stats[0] partition 0's, xcp_stats[1] partition 1's.
  using Xcc = std::pair<unsigned, double>;
  EXPECT_THAT(dpx.gfx_busy_percent,
              ::testing::ElementsAre(Xcc{0, 72}, Xcc{1, 72}, Xcc{2, 72}, Xcc{3, 72}));
  EXPECT_THAT(second.gfx_busy_percent,
              ::testing::ElementsAre(Xcc{0, 18}, Xcc{1, 18}, Xcc{2, 18}, Xcc{3, 18}));
  AcceleratorSample spx = backend->sample("0000:26:00.0");
  EXPECT_TRUE(spx.partitions.empty());
  EXPECT_EQ(spx.gfx_busy_percent.size(), 8u);
  EXPECT_TRUE(spx.partition_gfx_busy_percent.empty());
}

TEST(RocmBackend, PartialLibraryWorksWithWhatItHas) {
  auto backend = backend_for(kPartialLibrary, kMi300x);
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  EXPECT_EQ(backend->library().path, kPartialLibrary);
  EXPECT_THAT(
      backend->library().missing_symbols,
      UnorderedElementsAreArray(std::vector<std::string>{
          "rsmi_version_get", "rsmi_dev_unique_id_get", "rsmi_dev_serial_number_get",
          "rsmi_dev_target_graphics_version_get", "rsmi_dev_compute_partition_get",
          "rsmi_dev_memory_partition_get", "rsmi_topo_get_link_type", "rsmi_dev_power_cap_get",
          "rsmi_dev_ecc_enabled_get", "rsmi_dev_memory_busy_percent_get",
          "rsmi_dev_energy_count_get", "rsmi_dev_pci_replay_counter_get", "rsmi_dev_ecc_count_get",
          "rsmi_event_notification_init", "rsmi_event_notification_mask_set",
          "rsmi_event_notification_get", "rsmi_event_notification_stop",
          "rsmi_dev_memory_reserved_pages_get", "rsmi_dev_gpu_metrics_info_get"}));

  auto devices = backend->devices();
  ASSERT_TRUE(devices) << devices.error().message();
  ASSERT_EQ(devices->size(), 8u);
  const auto& d = (*devices)[3];
  EXPECT_EQ(d.pci_bus_id, "0000:65:00.0");
  EXPECT_EQ(d.inventory.product_name, "AMD Instinct MI300X");
  EXPECT_EQ(d.inventory.memory_total_bytes, kVram);
  EXPECT_EQ(d.inventory.driver_version, "6.8.5");
  EXPECT_TRUE(d.inventory.uuid.empty());
  EXPECT_TRUE(d.inventory.serial.empty());
  EXPECT_TRUE(d.inventory.gfx_version.empty());
  EXPECT_TRUE(d.inventory.compute_partition.empty());
  EXPECT_FALSE(d.inventory.power_limit_watts);
  EXPECT_FALSE(d.inventory.ecc_enabled);
  EXPECT_TRUE(d.peer_links.empty());

  AcceleratorSample s = backend->sample("0000:65:00.0");
  EXPECT_TRUE(s.reachable);
  EXPECT_EQ(s.gpu_utilization_percent, std::optional<double>(0));
  EXPECT_EQ(s.memory_used_bytes, std::optional<std::uint64_t>(kIdleVramUsed));
  EXPECT_EQ(s.gpu_temperature_c, std::optional<double>(41.0));
  EXPECT_EQ(s.power_watts, std::optional<double>(131.0));
  // Without rsmi_version_get the clock layout is told from the data.
  EXPECT_EQ(s.sm_clock_mhz, std::optional<std::uint32_t>(132));
  EXPECT_EQ(s.memory_clock_mhz, std::optional<std::uint32_t>(900));
  EXPECT_FALSE(s.memory_utilization_percent);
  EXPECT_FALSE(s.energy_millijoules);
  EXPECT_FALSE(s.pcie_replay_count);
  EXPECT_FALSE(s.ecc_corrected_volatile);

  EXPECT_TRUE(backend->poll_events(std::chrono::milliseconds(10)).empty());
}

TEST(RocmBackend, PathThatIsNotALibrary) {
  testing::TempDir dir;
  auto fake = dir.path() / "librocm_smi64.so.1";
  std::ofstream(fake) << "this is a text file, not a shared library\n";
  auto backend = backend_for(fake.string(), kMi300x);
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::bad_input);
  EXPECT_EQ(opened.error().input, fake.string());
  EXPECT_THAT(opened.error().message(), HasSubstr("not a loadable"));
  EXPECT_FALSE(backend->devices());
  EXPECT_FALSE(backend->sample("0000:05:00.0").reachable);
  EXPECT_TRUE(backend->poll_events(std::chrono::milliseconds(0)).empty());
}

TEST(RocmBackend, InitErrorIsAClearError) {
  testing::TempDir dir;
  auto scenario = write_scenario(dir, {{"init_error", "INIT_ERROR"}});
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_NE(opened.error().code, ErrorCode::not_found);
  EXPECT_EQ(opened.error().input, kLibrary);
  EXPECT_THAT(opened.error().problem, HasSubstr("rsmi_init failed"));
  EXPECT_THAT(opened.error().problem, HasSubstr("RSMI_STATUS_INIT_ERROR"));
  EXPECT_FALSE(opened.error().remedy.empty());
  EXPECT_FALSE(backend->devices());
  // Asking again gives the same answer.
  Status again = backend->open();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().problem, opened.error().problem);
}

TEST(RocmBackend, NoLibraryIsNotFound) {
  testing::TempDir dir;
  auto backend = backend_for((dir.path() / "librocm_smi64.so.1").string(), kMi300x);
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::not_found);
  EXPECT_FALSE(backend->devices());
}

}  // namespace
}  // namespace polyaccel
