// The amd-smi backend through its production loader, against our test build of libamd_smi.so
// (tests/inject/amd_smi) fed by scenario files: POLYACCEL_AMD_SMI_LIB names the built library,
// AMD_SMI_INJECT_SCENARIO the scenario. Also the AMD entry of the backend list, which takes
// amd-smi where it loads and ROCm SMI otherwise. ctest runs each case in its own process, so
// setting the environment here is safe.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "discover/accel/backends.h"
#include "support/inject_steps.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

const std::string kLibrary = AMD_SMI_INJECT_LIB;
const std::string kPartialLibrary = AMD_SMI_INJECT_PARTIAL_LIB;
const std::filesystem::path kMi300x =
    std::filesystem::path(AMD_SMI_SCENARIO_DIR) / "mi300x-8x.json";

using polyaccel::testing::kMi300xBusIds;
constexpr std::uint64_t kVram = 192ULL << 30;
constexpr std::uint64_t kIdleVramUsed = 297795584;
constexpr float kEnergyResolutionUj = 15.259f;  // the scenario's, as the library's float

double millijoules(std::uint64_t counter) {
  return static_cast<double>(static_cast<long double>(counter) * kEnergyResolutionUj / 1000.0L);
}

std::unique_ptr<AcceleratorBackend> backend_for(const std::string& library,
                                                const std::filesystem::path& scenario) {
  ::setenv("POLYACCEL_AMD_SMI_LIB", library.c_str(), 1);
  ::setenv("AMD_SMI_INJECT_SCENARIO", scenario.c_str(), 1);
  return make_amd_smi_backend();
}

std::filesystem::path write_scenario(const testing::TempDir& dir, const nlohmann::json& j) {
  auto path = dir.path() / "scenario.json";
  std::ofstream(path) << j.dump(2);
  return path;
}

using Steps = testing::InjectSteps;

class AmdSmiMi300xTest : public ::testing::Test {
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

TEST_F(AmdSmiMi300xTest, NamesItself) {
  EXPECT_EQ(backend_->name(), "amd-smi");
  EXPECT_EQ(backend_->vendor(), Vendor::amd);
  EXPECT_EQ(backend_->library().path, kLibrary);
  EXPECT_TRUE(backend_->library().missing_symbols.empty())
      << ::testing::PrintToString(backend_->library().missing_symbols);
  EXPECT_TRUE(backend_->library().note.empty()) << backend_->library().note;
}

TEST_F(AmdSmiMi300xTest, Inventory) {
  auto devices = backend_->devices();
  ASSERT_TRUE(devices) << devices.error().message();
  ASSERT_EQ(devices->size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const auto& d = (*devices)[i];
    SCOPED_TRACE(d.pci_bus_id);
    EXPECT_EQ(d.pci_bus_id, kMi300xBusIds[i]);
    EXPECT_EQ(d.partitions, 1u);
    const AcceleratorInventory& inv = d.inventory;
    EXPECT_EQ(inv.backend, "amd-smi");
    EXPECT_EQ(inv.index, i);
    EXPECT_EQ(inv.product_name, "AMD Instinct MI300X");
    EXPECT_EQ(inv.memory_total_bytes, kVram);
    EXPECT_EQ(inv.driver_version, "6.14.14");
    EXPECT_EQ(inv.gfx_version, "gfx942");
    EXPECT_EQ(inv.compute_partition, "SPX");
    EXPECT_EQ(inv.memory_partition, "NPS1");
    EXPECT_EQ(inv.power_limit_watts, std::optional<double>(750.0));
    EXPECT_EQ(inv.ecc_enabled, std::optional<bool>(true));
    EXPECT_FALSE(inv.mig_enabled);
    EXPECT_TRUE(inv.compute_capability.empty());
    EXPECT_EQ(inv.serial.rfind("PCB052", 0), 0u) << inv.serial;  // the board's, not the ASIC's
  }
  EXPECT_EQ((*devices)[0].inventory.uuid, "8aff74a1-0000-1000-803c-1f52d07e4b19");
  EXPECT_EQ((*devices)[0].inventory.serial, "PCB05214210");
}

TEST_F(AmdSmiMi300xTest, IdleSample) {
  AcceleratorSample s = backend_->sample("0000:05:00.0");
  EXPECT_EQ(s.pci_bus_id, "0000:05:00.0");
  EXPECT_TRUE(s.reachable);
  EXPECT_EQ(s.gpu_utilization_percent, std::optional<double>(0));
  EXPECT_EQ(s.memory_utilization_percent, std::optional<double>(0));
  EXPECT_EQ(s.memory_used_bytes, std::optional<std::uint64_t>(kIdleVramUsed));
  EXPECT_EQ(s.memory_free_bytes, std::optional<std::uint64_t>(kVram - kIdleVramUsed));
  // MI300X has no edge sensor: the hotspot stands in.
  EXPECT_EQ(s.gpu_temperature_c, std::optional<double>(41.0));
  EXPECT_EQ(s.hotspot_temperature_c, std::optional<double>(41.0));
  EXPECT_EQ(s.memory_temperature_c, std::optional<double>(35.0));
  EXPECT_EQ(s.power_watts, std::optional<double>(131.0));
  ASSERT_TRUE(s.energy_millijoules);
  EXPECT_NEAR(static_cast<double>(*s.energy_millijoules), millijoules(101234567890ULL), 1.0);
  EXPECT_EQ(s.sm_clock_mhz, std::optional<std::uint32_t>(132));
  EXPECT_EQ(s.memory_clock_mhz, std::optional<std::uint32_t>(900));
  EXPECT_EQ(s.pcie_replay_count, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.ecc_corrected_volatile, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.ecc_uncorrected_volatile, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.bad_pages_retired, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.bad_pages_pending, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.bad_pages_unreservable, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.throttle_reasons, std::optional<std::uint64_t>(0));
  EXPECT_TRUE(s.throttle_reason_names.empty());
  // A page retired before boot stays in the RAS table.
  EXPECT_EQ(backend_->sample("0000:26:00.0").bad_pages_retired, std::optional<std::uint64_t>(1));
}

// What metricslist.md adds, as amd-smi 26 gives it on an idle MI300X: every RAS block with ECC
// on, MI300's violation counters, and the v1.7 metrics table's XGMI, bandwidth and VCN/JPEG
// fields; the table's all-ones entries (JPEG engines 32 to 39) absent.
TEST_F(AmdSmiMi300xTest, MetricslistFieldsAtIdle) {
  AcceleratorSample s = backend_->sample("0000:05:00.0");
  ASSERT_TRUE(s.reachable);
  EXPECT_EQ(s.gtt_total_bytes, std::optional<std::uint64_t>(1649267441664ULL));
  EXPECT_EQ(s.gtt_used_bytes, std::optional<std::uint64_t>(12582912));
  EXPECT_EQ(s.visible_vram_total_bytes, std::optional<std::uint64_t>(kVram));
  EXPECT_EQ(s.visible_vram_used_bytes, std::optional<std::uint64_t>(kIdleVramUsed));
  EXPECT_FALSE(s.average_power_watts);  // MI300X reports the current socket power only
  std::vector<std::string> blocks;
  for (const auto& e : s.ecc_blocks) {
    blocks.push_back(e.block);
    EXPECT_EQ(e.correctable, 0u) << e.block;
    EXPECT_EQ(e.uncorrectable, 0u) << e.block;
    EXPECT_EQ(e.deferred, std::optional<std::uint64_t>(0)) << e.block;
  }
  EXPECT_THAT(blocks, ElementsAre("umc", "sdma", "gfx", "mmhub", "bif", "hdp", "xgmi_wafl"));
  EXPECT_EQ(s.ecc_deferred_volatile, std::optional<std::uint64_t>(0));
  AcceleratorSample sdma = backend_->sample("0000:46:00.0");
  ASSERT_GE(sdma.ecc_blocks.size(), 2u);
  EXPECT_EQ(sdma.ecc_blocks[1].block, "sdma");
  EXPECT_EQ(sdma.ecc_blocks[1].correctable, 1u);
  EXPECT_EQ(sdma.ecc_corrected_volatile, std::optional<std::uint64_t>(1));

  EXPECT_EQ(s.violation.accumulation_counter, std::optional<std::uint64_t>(5180000));
  for (std::size_t k = 0; k < ViolationSample::kKinds; ++k) {
    EXPECT_EQ(s.violation.residency_accumulated[k], std::optional<std::uint64_t>(0)) << k;
    EXPECT_EQ(s.violation.residency_percent[k], std::optional<double>(0)) << k;
  }
  ASSERT_EQ(s.xgmi_read_kb.size(), 8u);
  EXPECT_EQ(s.xgmi_read_kb[0], (std::pair<unsigned, std::uint64_t>{0, 0}));
  EXPECT_EQ(s.xgmi_read_kb[1], (std::pair<unsigned, std::uint64_t>{1, 2776148}));
  ASSERT_EQ(s.xgmi_write_kb.size(), 8u);
  EXPECT_EQ(s.xgmi_write_kb[7], (std::pair<unsigned, std::uint64_t>{7, 2097152}));
  EXPECT_EQ(s.pcie_bandwidth_accumulated_gbs, std::optional<double>(1824));
  EXPECT_EQ(s.vram_max_bandwidth_gbs, std::optional<double>(5300));
  ASSERT_EQ(s.vcn_busy_percent.size(), 4u);
  EXPECT_EQ(s.vcn_busy_percent[0], (std::pair<unsigned, double>{0, 12}));
  ASSERT_EQ(s.jpeg_busy_percent.size(), 32u);
  EXPECT_EQ(s.jpeg_busy_percent[3], (std::pair<unsigned, double>{3, 25}));
  // Eight XCCs (MI300X in SPX), each as busy as the GPU in this scenario; the other 0 (absent).
  ASSERT_EQ(s.gfx_busy_percent.size(), 8u);
  EXPECT_EQ(s.gfx_busy_percent[7], (std::pair<unsigned, double>{7, *s.gpu_utilization_percent}));
}

// Training: package power tracking on 85:00.0 and socket and HBM thermal on e5:00.0, as
// residencies and percentages.
TEST_F(AmdSmiMi300xTest, ViolationResidenciesFollowTheSteps) {
  steps_->go(1);
  AcceleratorSample s85 = backend_->sample("0000:85:00.0");
  EXPECT_EQ(s85.violation.accumulation_counter, std::optional<std::uint64_t>(5480000));
  EXPECT_EQ(s85.violation.residency_accumulated[1], std::optional<std::uint64_t>(54000));
  EXPECT_EQ(s85.violation.residency_percent[1], std::optional<double>(18));
  EXPECT_EQ(s85.violation.residency_percent[2], std::optional<double>(0));
  // Per XCC: the power limit held each of the eight XCCs' clocks below the host's limit.
  for (std::size_t k = 0; k < ViolationSample::kXccKinds; ++k) {
    ASSERT_EQ(s85.violation.xcc_accumulated[k].size(), 8u) << k;
    ASSERT_EQ(s85.violation.xcc_percent[k].size(), 8u) << k;
  }
  EXPECT_EQ(s85.violation.xcc_percent[0][5], (std::pair<unsigned, double>{5, 18}));  // power
  EXPECT_EQ(s85.violation.xcc_percent[1][5], (std::pair<unsigned, double>{5, 0}));   // thermal
  EXPECT_EQ(s85.violation.xcc_accumulated[3][7], (std::pair<unsigned, std::uint64_t>{7, 54000}));
  AcceleratorSample e5 = backend_->sample("0000:e5:00.0");
  EXPECT_EQ(e5.violation.residency_accumulated[2], std::optional<std::uint64_t>(21000));
  EXPECT_EQ(e5.violation.residency_percent[2], std::optional<double>(7));
  EXPECT_EQ(e5.violation.residency_accumulated[4], std::optional<std::uint64_t>(9000));
  EXPECT_EQ(e5.violation.residency_percent[4], std::optional<double>(3));
  EXPECT_EQ(e5.gtt_used_bytes, std::optional<std::uint64_t>(4294967296ULL));
}

TEST_F(AmdSmiMi300xTest, SamplesFollowTheSteps) {
  steps_->go(1);
  for (size_t i = 0; i < 8; ++i) {
    SCOPED_TRACE(kMi300xBusIds[i]);
    AcceleratorSample s = backend_->sample(kMi300xBusIds[i]);
    EXPECT_TRUE(s.reachable);
    EXPECT_EQ(s.gpu_utilization_percent, std::optional<double>(98));
    EXPECT_EQ(s.memory_utilization_percent, std::optional<double>(61));
    EXPECT_EQ(s.memory_used_bytes, std::optional<std::uint64_t>(183609851904ULL));
    EXPECT_EQ(s.hotspot_temperature_c, std::optional<double>(76.0 + static_cast<double>(i)));
    EXPECT_EQ(s.power_watts, std::optional<double>(690.0 + 3.0 * static_cast<double>(i)));
    EXPECT_EQ(s.sm_clock_mhz, std::optional<std::uint32_t>(2100));
    EXPECT_EQ(s.memory_clock_mhz, std::optional<std::uint32_t>(1300));
  }
  EXPECT_EQ(backend_->sample("0000:65:00.0").ecc_corrected_volatile,
            std::optional<std::uint64_t>(2));
  EXPECT_EQ(backend_->sample("0000:85:00.0").pcie_replay_count, std::optional<std::uint64_t>(3));
  AcceleratorSample energy = backend_->sample("0000:05:00.0");
  ASSERT_TRUE(energy.energy_millijoules);
  EXPECT_NEAR(static_cast<double>(*energy.energy_millijoules),
              millijoules(101234567890ULL + 2800000000ULL), 1.0);

  // MI300 reports throttling as violation flags: socket thermal and HBM thermal on e5, package
  // power on 85, mapped onto amdgpu's independent throttler bits.
  AcceleratorSample e5 = backend_->sample("0000:e5:00.0");
  EXPECT_EQ(e5.throttle_reasons, std::optional<std::uint64_t>((1ULL << 36) | (1ULL << 34)));
  EXPECT_THAT(e5.throttle_reason_names, ElementsAre("temp_mem", "temp_hotspot"));
  EXPECT_THAT(backend_->sample("0000:85:00.0").throttle_reason_names, ElementsAre("ppt0"));
  EXPECT_EQ(backend_->sample("0000:05:00.0").throttle_reasons, std::optional<std::uint64_t>(0));

  steps_->go(2);
  AcceleratorSample a6 = backend_->sample("0000:a6:00.0");
  EXPECT_EQ(a6.ecc_uncorrected_volatile, std::optional<std::uint64_t>(1));
  EXPECT_EQ(a6.gpu_utilization_percent, std::optional<double>(0));
  EXPECT_EQ(a6.bad_pages_pending, std::optional<std::uint64_t>(1));
  EXPECT_EQ(a6.bad_pages_retired, std::optional<std::uint64_t>(0));
  EXPECT_TRUE(backend_->sample("0000:e5:00.0").throttle_reason_names.empty());

  steps_->go(3);
  a6 = backend_->sample("0000:a6:00.0");
  EXPECT_EQ(a6.bad_pages_pending, std::optional<std::uint64_t>(0));
  EXPECT_EQ(a6.bad_pages_retired, std::optional<std::uint64_t>(1));
}

TEST_F(AmdSmiMi300xTest, MemoryTemperatureFromTheHottestHbmStack) {
  // 0000:c6:00.0 has no VRAM sensor: its hottest HBM stack stands in.
  EXPECT_EQ(backend_->sample("0000:c6:00.0").memory_temperature_c, std::optional<double>(38.0));
  // Each stack on its own too; no edge sensor on an MI300X.
  AcceleratorSample c6 = backend_->sample("0000:c6:00.0");
  EXPECT_THAT(
      c6.hbm_temperature_c,
      ElementsAre(std::pair<unsigned, double>{0, 36.0}, std::pair<unsigned, double>{1, 38.0},
                  std::pair<unsigned, double>{2, 37.0}, std::pair<unsigned, double>{3, 35.0}));
  EXPECT_FALSE(c6.edge_temperature_c);
  EXPECT_TRUE(backend_->sample("0000:05:00.0").hbm_temperature_c.empty());
  steps_->go(1);
  EXPECT_EQ(backend_->sample("0000:c6:00.0").memory_temperature_c, std::optional<double>(61.0));
  EXPECT_EQ(backend_->sample("0000:e5:00.0").memory_temperature_c, std::optional<double>(58.0));
}

TEST_F(AmdSmiMi300xTest, UnsupportedFieldsStayEmpty) {
  for (const auto& id : kMi300xBusIds) {
    AcceleratorSample s = backend_->sample(id);
    EXPECT_TRUE(s.reachable);
    EXPECT_TRUE(s.gpu_temperature_c);  // from the hotspot: no edge sensor
    // What amd-smi has no call for is never filled.
    EXPECT_FALSE(s.ecc_corrected_aggregate);
    EXPECT_FALSE(s.ecc_uncorrected_aggregate);
    EXPECT_FALSE(s.retired_pages_double_bit);
    EXPECT_FALSE(s.remapped_rows_pending);
    EXPECT_FALSE(s.board_temperature_c);
  }
}

// MI200 fills the metrics table's independent throttle bits; and amd-smi's ECC count is the sum
// over the blocks that have ECC on.
TEST(AmdSmiBackend, ThrottleBitsFromTheMetricsTable) {
  testing::TempDir dir;
  auto scenario = write_scenario(
      dir, {{"devices",
             {{{"pci_bus_id", "0001:c3:00.0"},
               {"name", "AMD Instinct MI250X"},
               {"gfx_version", "gfx90a"},
               {"ecc_enabled_blocks", {"umc", "gfx"}}}}},
            {"steps",
             {{{"all",
                {{"indep_throttle_status", (1ULL << 0) | (1ULL << 36) | (1ULL << 50)},
                 {"temperature_edge_c", 55},
                 {"temperature_junction_c", 71},
                 {"power_average_watts", 480},
                 {"ecc",
                  {{"umc", {{"correctable", 4}, {"uncorrectable", 1}}},
                   {"gfx", {{"correctable", 3}, {"uncorrectable", 0}}},
                   {"sdma", {{"correctable", 9}, {"uncorrectable", 9}}}}}}}}}}});
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  auto devices = backend->devices();
  ASSERT_TRUE(devices);
  EXPECT_EQ((*devices)[0].inventory.gfx_version, "gfx90a");
  AcceleratorSample s = backend->sample("0001:c3:00.0");
  EXPECT_THAT(s.throttle_reason_names, ElementsAre("ppt0", "temp_hotspot", "bit50"));
  EXPECT_EQ(s.gpu_temperature_c, std::optional<double>(55.0));  // the edge sensor first
  EXPECT_EQ(s.hotspot_temperature_c, std::optional<double>(71.0));
  EXPECT_EQ(s.power_watts, std::optional<double>(480.0));  // the average, before MI300
  EXPECT_EQ(s.ecc_corrected_volatile, std::optional<std::uint64_t>(7));
  EXPECT_EQ(s.ecc_uncorrected_volatile, std::optional<std::uint64_t>(1));
}

// MI200: the edge sensor on its own and each HBM stack, next to the VRAM sensor (which stays the
// memory temperature); a stack the library answers 0 or 65535 for is not there.
TEST(AmdSmiBackend, EdgeAndHbmStacksOfAnMi250x) {
  testing::TempDir dir;
  auto scenario =
      write_scenario(dir, {{"devices",
                            {{{"pci_bus_id", "0000:c1:00.0"},
                              {"name", "AMD Instinct MI250X"},
                              {"model_number", "102-D65209-0C"},
                              {"gfx_version", "gfx90a"}},
                             {{"pci_bus_id", "0000:c6:00.0"},
                              {"name", "AMD Instinct MI250X"},
                              {"gfx_version", "gfx90a"}}}},
                           {"steps",
                            {{{"all",
                               {{"temperature_edge_c", 44},
                                {"temperature_junction_c", 58},
                                {"temperature_memory_c", 49},
                                {"temperature_hbm_c", {46, 0, 47, 65535}},
                                {"power_average_watts", 482}}},
                              {"devices", {{"0000:c6:00.0", {{"temperature_edge_c", 400}}}}}}}}});
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  ASSERT_TRUE(backend->devices());
  AcceleratorSample s = backend->sample("0000:c1:00.0");
  EXPECT_EQ(s.edge_temperature_c, std::optional<double>(44.0));
  EXPECT_EQ(s.gpu_temperature_c, std::optional<double>(44.0));
  EXPECT_EQ(s.memory_temperature_c, std::optional<double>(49.0));
  EXPECT_THAT(s.hbm_temperature_c, ElementsAre(std::pair<unsigned, double>{0, 46.0},
                                               std::pair<unsigned, double>{2, 47.0}));
  EXPECT_EQ(s.average_power_watts, std::optional<double>(482.0));
  // An absurd edge reading is no edge temperature (the GPU temperature keeps what it said).
  EXPECT_FALSE(backend->sample("0000:c6:00.0").edge_temperature_c);
}

// A library before 26 lays out the info structs and the event record with shorter strings: the
// backend leaves those structs alone, says so, and still reads the events.
TEST(AmdSmiBackend, LibraryBefore26) {
  testing::TempDir dir;
  auto scenario = write_scenario(
      dir,
      {{"library_version", "25.5.1"},
       {"driver_version", "6.10.5"},
       {"devices",
        {{{"pci_bus_id", "0000:05:00.0"}, {"name", "AMD Instinct MI300X"}, {"vram_bytes", kVram}},
         {{"pci_bus_id", "0000:26:00.0"}, {"name", "AMD Instinct MI300X"}}}},
       {"steps",
        {{{"all", {{"busy_percent", 12}, {"socket_power_watts", 300}}}},
         {{"events",
           {{{"device", "0000:26:00.0"}, {"type", "gpu_pre_reset"}, {"message", "first"}},
            {{"device", "0000:05:00.0"}, {"type", "gpu_post_reset"}, {"message", "second"}}}}}}}});
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  EXPECT_THAT(backend->library().note, HasSubstr("older than 26"));
  auto devices = backend->devices();
  ASSERT_TRUE(devices);
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_TRUE((*devices)[0].inventory.product_name.empty());
  EXPECT_TRUE((*devices)[0].inventory.driver_version.empty());
  EXPECT_EQ((*devices)[0].inventory.memory_total_bytes, kVram);
  AcceleratorSample s = backend->sample("0000:05:00.0");
  EXPECT_EQ(s.gpu_utilization_percent, std::optional<double>(12));
  EXPECT_FALSE(s.power_watts);

  Steps steps(kLibrary);
  ASSERT_TRUE(steps.ok());
  steps.go(1);
  auto events = backend->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:26:00.0");
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::critical);
  EXPECT_THAT(events[0].text, HasSubstr("first"));
  EXPECT_EQ(events[1].pci_bus_id, "0000:05:00.0");
  EXPECT_THAT(events[1].text, HasSubstr("second"));
}

// A 25.x library with the long event records of 26: the stride is told from the records.
TEST(AmdSmiBackend, EventRecordSizeToldFromTheRecords) {
  testing::TempDir dir;
  auto scenario = write_scenario(
      dir, {{"library_version", "25.4.2"},
            {"event_record_size", 272},
            {"devices", {{{"pci_bus_id", "0000:05:00.0"}}, {{"pci_bus_id", "0000:26:00.0"}}}},
            {"steps",
             {nlohmann::json::object(),
              {{"events",
                {{{"device", "0000:05:00.0"}, {"type", "gpu_pre_reset"}},
                 {{"device", "0000:26:00.0"}, {"type", "gpu_post_reset"}, {"message", "done"}},
                 {{"device", "0000:05:00.0"}, {"type", "thermal_throttle"}}}}}}}});
  auto backend = backend_for(kLibrary, scenario);
  ASSERT_TRUE(backend->open());
  Steps steps(kLibrary);
  ASSERT_TRUE(steps.ok());
  steps.go(1);
  auto events = backend->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].code, 3u);
  EXPECT_EQ(events[1].pci_bus_id, "0000:26:00.0");
  EXPECT_THAT(events[1].text, HasSubstr("done"));
  EXPECT_EQ(events[2].code, 2u);
}

// Every partition's own activity and memory, through its own processor handle (the scenario's
// DPX GPU: partition 0 at 72 % with 64 GiB used, partition 1 at 18 % with 8 GiB, 96 GiB each).
// GPU-wide values stay on the GPU's sample; a GPU in SPX has no further partitions.
TEST(AmdSmiBackend, EachPartitionIsSampled) {
  constexpr std::uint64_t kGiB = 1ULL << 30;
  auto backend = backend_for(
      kLibrary, (std::filesystem::path(AMD_SMI_SCENARIO_DIR) / "mi300x-2x-dpx.json").string());
  ASSERT_TRUE(backend->open());
  auto devices = backend->devices();
  ASSERT_TRUE(devices);
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].partitions, 2u);
  EXPECT_EQ((*devices)[1].inventory.index, 2u);
  AcceleratorSample dpx = backend->sample("0000:05:00.0");
  ASSERT_TRUE(dpx.reachable);
  EXPECT_EQ(dpx.gpu_utilization_percent, 72.0);
  EXPECT_EQ(dpx.memory_used_bytes, 64 * kGiB);
  EXPECT_EQ(dpx.power_watts, 512.0);
  ASSERT_EQ(dpx.partitions.size(), 1u);
  const PartitionSample& second = dpx.partitions[0];
  EXPECT_EQ(second.partition_id, 1u);
  EXPECT_EQ(second.index, 1u);
  EXPECT_EQ(second.gpu_utilization_percent, 18.0);
  EXPECT_EQ(second.memory_utilization_percent, 9.0);
  EXPECT_EQ(second.memory_used_bytes, 8 * kGiB);
  EXPECT_EQ(second.memory_free_bytes, 88 * kGiB);
  EXPECT_EQ(second.memory_total_bytes, 96 * kGiB);
  // Each partition's own XCCs from the GPU's metrics table: an MI300X's 8 are 4 per partition in
  // DPX, xcp_stats[0] partition 0's, xcp_stats[1] partition 1's.
  using Xcc = std::pair<unsigned, double>;
  EXPECT_THAT(dpx.gfx_busy_percent, ElementsAre(Xcc{0, 72}, Xcc{1, 72}, Xcc{2, 72}, Xcc{3, 72}));
  EXPECT_THAT(second.gfx_busy_percent, ElementsAre(Xcc{0, 18}, Xcc{1, 18}, Xcc{2, 18}, Xcc{3, 18}));
  AcceleratorSample spx = backend->sample("0000:26:00.0");
  EXPECT_TRUE(spx.partitions.empty());
  EXPECT_EQ(spx.gfx_busy_percent.size(), 8u);
  EXPECT_TRUE(spx.partition_gfx_busy_percent.empty());
}

// In a compute partition mode the library shows one processor per partition, each on a function
// of the GPU's PCI device that does not exist on the bus (rocm-systems#5805): one GPU, function 0.
TEST(AmdSmiBackend, PartitionsOfOneGpuAreOneDevice) {
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
  EXPECT_EQ((*devices)[0].inventory.compute_partition, "CPX");
  EXPECT_EQ((*devices)[0].inventory.memory_partition, "NPS4");
  EXPECT_EQ((*devices)[0].partitions, 4u);
  EXPECT_EQ((*devices)[1].partitions, 1u);
  EXPECT_EQ((*devices)[1].inventory.index, 4u);
  EXPECT_FALSE(backend->sample("0000:05:00.2").reachable);  // no such function
  // An event of a partition is an event of its GPU.
  Steps steps(kLibrary);
  ASSERT_TRUE(steps.ok());
  steps.go(1);
  auto events = backend->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:05:00.0");
}

// A device whose calls answer "not supported" after answering before is gone too.
TEST(AmdSmiBackend, DeviceWhoseFieldsTurnUnsupportedIsUnreachable) {
  testing::TempDir dir;
  auto scenario =
      write_scenario(dir, {{"devices", {{{"pci_bus_id", "0000:05:00.0"}}}},
                           {"steps",
                            {{{"all", {{"busy_percent", 5}, {"temperature_junction_c", 40}}}},
                             {{"all", {{"lost", "NOT_SUPPORTED"}}}},
                             {{"all", {{"lost", false}}}}}}});
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

TEST(AmdSmiBackend, PartialLibraryWorksWithWhatItHas) {
  auto backend = backend_for(kPartialLibrary, kMi300x);
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  EXPECT_EQ(backend->library().path, kPartialLibrary);
  EXPECT_THAT(
      backend->library().missing_symbols,
      UnorderedElementsAreArray(std::vector<std::string>{"amdsmi_get_lib_version",
                                                         "amdsmi_get_gpu_device_uuid",
                                                         "amdsmi_get_gpu_asic_info",
                                                         "amdsmi_get_gpu_board_info",
                                                         "amdsmi_get_pcie_info",
                                                         "amdsmi_get_gpu_compute_partition",
                                                         "amdsmi_get_gpu_memory_partition",
                                                         "amdsmi_topo_get_link_type",
                                                         "amdsmi_get_power_cap_info",
                                                         "amdsmi_get_gpu_ecc_enabled",
                                                         "amdsmi_get_energy_count",
                                                         "amdsmi_get_gpu_pci_replay_counter",
                                                         "amdsmi_get_gpu_total_ecc_count",
                                                         "amdsmi_get_gpu_ecc_count",
                                                         "amdsmi_get_gpu_bad_page_info",
                                                         "amdsmi_get_gpu_metrics_info",
                                                         "amdsmi_get_violation_status",
                                                         "amdsmi_init_gpu_event_notification",
                                                         "amdsmi_set_gpu_event_notification_mask",
                                                         "amdsmi_get_gpu_event_notification",
                                                         "amdsmi_stop_gpu_event_notification"}));

  auto devices = backend->devices();
  ASSERT_TRUE(devices) << devices.error().message();
  ASSERT_EQ(devices->size(), 8u);
  const auto& d = (*devices)[3];
  EXPECT_EQ(d.pci_bus_id, "0000:65:00.0");
  EXPECT_EQ(d.inventory.memory_total_bytes, kVram);
  EXPECT_EQ(d.inventory.driver_version, "6.14.14");
  EXPECT_TRUE(d.inventory.uuid.empty());
  EXPECT_TRUE(d.inventory.product_name.empty());
  EXPECT_TRUE(d.inventory.gfx_version.empty());
  EXPECT_FALSE(d.inventory.power_limit_watts);
  EXPECT_FALSE(d.inventory.ecc_enabled);
  EXPECT_TRUE(d.peer_links.empty());

  AcceleratorSample s = backend->sample("0000:65:00.0");
  EXPECT_TRUE(s.reachable);
  EXPECT_EQ(s.gpu_utilization_percent, std::optional<double>(0));
  EXPECT_EQ(s.memory_used_bytes, std::optional<std::uint64_t>(kIdleVramUsed));
  EXPECT_EQ(s.gpu_temperature_c, std::optional<double>(41.0));
  EXPECT_EQ(s.power_watts, std::optional<double>(131.0));
  EXPECT_EQ(s.sm_clock_mhz, std::optional<std::uint32_t>(132));
  EXPECT_FALSE(s.energy_millijoules);
  EXPECT_FALSE(s.pcie_replay_count);
  EXPECT_FALSE(s.ecc_corrected_volatile);
  EXPECT_FALSE(s.bad_pages_retired);
  EXPECT_FALSE(s.throttle_reasons);
  // Without amdsmi_get_gpu_ecc_count, the metrics table and the violation status: no per-block
  // counts, residencies or XGMI data; GTT comes through the memory calls it has.
  EXPECT_TRUE(s.ecc_blocks.empty());
  EXPECT_TRUE(s.violation.empty());
  EXPECT_TRUE(s.xgmi_read_kb.empty());
  EXPECT_FALSE(s.vram_max_bandwidth_gbs);
  EXPECT_EQ(s.gtt_total_bytes, std::optional<std::uint64_t>(1649267441664ULL));
  EXPECT_TRUE(backend->poll_events(std::chrono::milliseconds(10)).empty());
}

TEST(AmdSmiBackend, PathThatIsNotALibrary) {
  testing::TempDir dir;
  auto fake = dir.path() / "libamd_smi.so";
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

TEST(AmdSmiBackend, InitErrorIsAClearError) {
  testing::TempDir dir;
  auto scenario = write_scenario(dir, {{"init_error", "DRM_ERROR"}});
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_NE(opened.error().code, ErrorCode::not_found);
  EXPECT_EQ(opened.error().input, kLibrary);
  EXPECT_THAT(opened.error().problem, HasSubstr("amdsmi_init failed"));
  EXPECT_THAT(opened.error().problem, HasSubstr("AMDSMI_STATUS_DRM_ERROR"));
  EXPECT_FALSE(opened.error().remedy.empty());
  EXPECT_FALSE(backend->devices());
  Status again = backend->open();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().problem, opened.error().problem);
}

// ROCm installed on a host without an AMD GPU: amd-smi finds no amdgpu driver. That is absence,
// not a broken install.
TEST(AmdSmiBackend, NoAmdgpuDriverIsAbsence) {
  testing::TempDir dir;
  auto scenario = write_scenario(dir, {{"init_error", "DRIVER_NOT_LOADED"}});
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::not_found);
  EXPECT_THAT(opened.error().problem, HasSubstr("amdgpu driver is not loaded"));
}

// The test build refuses a scenario it does not understand, as a library that cannot start.
TEST(AmdSmiBackend, UnknownScenarioKeyIsAnInitError) {
  testing::TempDir dir;
  auto scenario = write_scenario(
      dir, {{"devices", {{{"pci_bus_id", "0000:05:00.0"}, {"vram_gigabytes", 192}}}}});
  auto backend = backend_for(kLibrary, scenario);
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_THAT(opened.error().problem, HasSubstr("AMDSMI_STATUS_INIT_ERROR"));
}

TEST(AmdSmiBackend, NoLibraryIsNotFound) {
  testing::TempDir dir;
  auto backend = backend_for((dir.path() / "libamd_smi.so").string(), kMi300x);
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::not_found);
  EXPECT_FALSE(backend->devices());
}

// ---- the AMD entry of the list --------------------------------------------------------------

std::unique_ptr<AcceleratorBackend> amd_entry(const std::string& amd_smi_library,
                                              const std::string& rocm_smi_library) {
  ::setenv("POLYACCEL_AMD_SMI_LIB", amd_smi_library.c_str(), 1);
  ::setenv("AMD_SMI_INJECT_SCENARIO", kMi300x.c_str(), 1);
  ::setenv("POLYACCEL_ROCM_SMI_LIB", rocm_smi_library.c_str(), 1);
  ::setenv("ROCM_SMI_INJECT_SCENARIO",
           (std::filesystem::path(ROCM_SMI_SCENARIO_DIR) / "mi300x-8x.json").c_str(), 1);
  return make_amd_backend();
}

TEST(AmdEntry, TakesAmdSmiWhereItLoads) {
  auto backend = amd_entry(kLibrary, ROCM_SMI_INJECT_LIB);
  ASSERT_TRUE(backend->open());
  EXPECT_EQ(backend->name(), "amd-smi");
  EXPECT_EQ(backend->library().path, kLibrary);
  auto devices = backend->devices();
  ASSERT_TRUE(devices);
  EXPECT_EQ((*devices)[0].inventory.backend, "amd-smi");
}

TEST(AmdEntry, FallsBackToRocmSmiWithoutAmdSmi) {
  testing::TempDir dir;
  auto backend = amd_entry((dir.path() / "libamd_smi.so").string(), ROCM_SMI_INJECT_LIB);
  Status opened = backend->open();
  ASSERT_TRUE(opened) << opened.error().message();
  EXPECT_EQ(backend->name(), "rocm-smi");
  EXPECT_EQ(backend->library().path, ROCM_SMI_INJECT_LIB);
  EXPECT_THAT(backend->library().note, HasSubstr("amd-smi absent"));
  EXPECT_THAT(backend->library().note, HasSubstr("ROCm SMI used"));
  auto devices = backend->devices();
  ASSERT_TRUE(devices);
  ASSERT_EQ(devices->size(), 8u);
  EXPECT_EQ((*devices)[0].inventory.backend, "rocm-smi");

  HostModel model;
  std::vector<std::unique_ptr<AcceleratorBackend>> backends;
  backends.push_back(std::move(backend));
  auto statuses = merge_accelerators(model, backends);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].name, "rocm-smi");
  EXPECT_TRUE(statuses[0].present);
  EXPECT_THAT(statuses[0].detail, HasSubstr("amd-smi absent"));
}

TEST(AmdEntry, BrokenAmdSmiFallsBackToRocmSmiAndSaysWhy) {
  testing::TempDir dir;
  auto fake = dir.path() / "libamd_smi.so";
  std::ofstream(fake) << "not a library\n";
  auto backend = amd_entry(fake.string(), ROCM_SMI_INJECT_LIB);
  ASSERT_TRUE(backend->open());
  EXPECT_EQ(backend->name(), "rocm-smi");
  EXPECT_THAT(backend->library().note, HasSubstr("amd-smi failed"));
  EXPECT_THAT(backend->library().note, HasSubstr("not a loadable"));
}

// ROCm installed, no AMD GPU: amd-smi's "no amdgpu driver" explains ROCm SMI's failing init too,
// so the entry is absent rather than failed.
TEST(AmdEntry, NoAmdgpuDriverIsAbsentThroughBothLibraries) {
  testing::TempDir dir;
  auto no_driver = write_scenario(dir, {{"init_error", "DRIVER_NOT_LOADED"}});
  auto rocm_no_gpu = dir.path() / "rocm.json";
  std::ofstream(rocm_no_gpu) << R"({"init_error": "INIT_ERROR"})";
  auto backend = amd_entry(kLibrary, ROCM_SMI_INJECT_LIB);
  ::setenv("AMD_SMI_INJECT_SCENARIO", no_driver.c_str(), 1);
  ::setenv("ROCM_SMI_INJECT_SCENARIO", rocm_no_gpu.c_str(), 1);
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::not_found);
  EXPECT_EQ(backend->name(), "amd-smi");
  EXPECT_THAT(opened.error().message(), HasSubstr("amdgpu driver is not loaded"));
}

// A broken amd-smi with no ROCm SMI to stand in: amd-smi's failure is the answer.
TEST(AmdEntry, BrokenAmdSmiWithoutRocmSmiIsItsFailure) {
  testing::TempDir dir;
  auto fake = dir.path() / "libamd_smi.so";
  std::ofstream(fake) << "not a library\n";
  auto backend = amd_entry(fake.string(), (dir.path() / "librocm_smi64.so.1").string());
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::bad_input);
  EXPECT_EQ(backend->name(), "amd-smi");
}

TEST(AmdEntry, NeitherLibraryIsAbsent) {
  testing::TempDir dir;
  auto backend = amd_entry((dir.path() / "libamd_smi.so").string(),
                           (dir.path() / "librocm_smi64.so.1").string());
  Status opened = backend->open();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::not_found);
  HostModel model;
  std::vector<std::unique_ptr<AcceleratorBackend>> backends;
  backends.push_back(std::move(backend));
  auto statuses = merge_accelerators(model, backends);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_FALSE(statuses[0].present);
  EXPECT_THAT(statuses[0].detail, HasSubstr("absent"));
  EXPECT_THAT(statuses[0].detail, HasSubstr("amd-smi absent"));
  EXPECT_TRUE(model.accelerators.empty());
}

}  // namespace
}  // namespace polyaccel
