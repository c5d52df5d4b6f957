// The same 8xMI300X machine (tests/inject/{amd_smi,rocm_smi}/scenarios/mi300x-8x.json: same bus
// ids, values, steps and events) through both AMD backends and their production loaders: what
// the two libraries report alike must read alike. What only one of them has is tested in
// amd_smi_backend_test.cc and rocm_backend_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "discover/accel/backends.h"
#include "support/inject_steps.h"

namespace polyaccel {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

using polyaccel::testing::kMi300xBusIds;

struct AmdLibrary {
  std::string backend;  // "amd-smi" or "rocm-smi"
  std::string path;     // our test build
  std::filesystem::path scenario;
};

void PrintTo(const AmdLibrary& library, std::ostream* os) {
  *os << library.backend;
}

class AmdMi300xTest : public ::testing::TestWithParam<AmdLibrary> {
 protected:
  void SetUp() override {
    const AmdLibrary& library = GetParam();
    if (library.backend == "amd-smi") {
      ::setenv("POLYACCEL_AMD_SMI_LIB", library.path.c_str(), 1);
      ::setenv("AMD_SMI_INJECT_SCENARIO", library.scenario.c_str(), 1);
      backend_ = make_amd_smi_backend();
    } else {
      ::setenv("POLYACCEL_ROCM_SMI_LIB", library.path.c_str(), 1);
      ::setenv("ROCM_SMI_INJECT_SCENARIO", library.scenario.c_str(), 1);
      backend_ = make_rocm_smi_backend();
    }
    Status opened = backend_->open();
    ASSERT_TRUE(opened) << opened.error().message();
    ASSERT_EQ(backend_->name(), library.backend);
    steps_ = std::make_unique<testing::InjectSteps>(library.path);
    ASSERT_TRUE(steps_->ok());
  }

  std::unique_ptr<AcceleratorBackend> backend_;
  std::unique_ptr<testing::InjectSteps> steps_;
};

TEST_P(AmdMi300xTest, EveryGpuHasXgmiToTheOtherSeven) {
  auto devices = backend_->devices();
  ASSERT_TRUE(devices);
  for (const auto& d : *devices) {
    SCOPED_TRACE(d.pci_bus_id);
    std::vector<std::string> peers;
    for (const PeerLink& p : d.peer_links) {
      EXPECT_EQ(p.link, (Link{LinkLevel::xgmi, 1}));
      peers.push_back(p.peer.to_string());
    }
    std::vector<std::string> others;
    std::copy_if(kMi300xBusIds.begin(), kMi300xBusIds.end(), std::back_inserter(others),
                 [&](const std::string& id) { return id != d.pci_bus_id; });
    EXPECT_THAT(peers, UnorderedElementsAreArray(others));
  }
}

// metricslist.md's fields that both libraries give: each RAS block's counts, GTT and visible
// VRAM, and the v1.7 metrics table's XGMI data, bandwidths, residencies and VCN/JPEG busy.
TEST_P(AmdMi300xTest, MetricslistFieldsAlike) {
  AcceleratorSample s = backend_->sample("0000:46:00.0");
  ASSERT_TRUE(s.reachable);
  std::vector<std::string> blocks;
  for (const auto& e : s.ecc_blocks)
    blocks.push_back(e.block);
  EXPECT_THAT(blocks,
              ::testing::ElementsAre("umc", "sdma", "gfx", "mmhub", "bif", "hdp", "xgmi_wafl"));
  ASSERT_EQ(s.ecc_blocks.size(), 7u);
  EXPECT_EQ(s.ecc_blocks[1].correctable, 1u);
  EXPECT_EQ(s.ecc_blocks[0].correctable, 0u);
  EXPECT_EQ(s.gtt_total_bytes, std::optional<std::uint64_t>(1649267441664ULL));
  EXPECT_EQ(s.gtt_used_bytes, std::optional<std::uint64_t>(12582912));
  EXPECT_EQ(s.visible_vram_total_bytes, std::optional<std::uint64_t>(192ULL << 30));
  EXPECT_EQ(s.violation.accumulation_counter, std::optional<std::uint64_t>(5180000));
  EXPECT_EQ(s.violation.residency_accumulated[1], std::optional<std::uint64_t>(0));
  ASSERT_EQ(s.xgmi_read_kb.size(), 8u);
  EXPECT_EQ(s.xgmi_read_kb[1].second, 1835008u);
  EXPECT_EQ(s.pcie_bandwidth_accumulated_gbs, std::optional<double>(1824));
  EXPECT_EQ(s.vram_max_bandwidth_gbs, std::optional<double>(5300));
  AcceleratorSample decoding = backend_->sample("0000:05:00.0");
  ASSERT_EQ(decoding.vcn_busy_percent.size(), 4u);
  EXPECT_EQ(decoding.vcn_busy_percent[0].second, 12);
  ASSERT_EQ(decoding.jpeg_busy_percent.size(), 32u);
  EXPECT_EQ(decoding.jpeg_busy_percent[3].second, 25);
  ASSERT_EQ(decoding.gfx_busy_percent.size(), 8u);  // per XCC
  EXPECT_EQ(decoding.gfx_busy_percent[0].second, decoding.gpu_utilization_percent.value_or(-1));
}

TEST_P(AmdMi300xTest, BadPagesOfTheRasTable) {
  AcceleratorSample s = backend_->sample("0000:05:00.0");
  EXPECT_EQ(s.bad_pages_retired, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.bad_pages_pending, std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.bad_pages_unreservable, std::optional<std::uint64_t>(0));
  // A page retired before boot stays in the table.
  EXPECT_EQ(backend_->sample("0000:26:00.0").bad_pages_retired, std::optional<std::uint64_t>(1));
}

TEST_P(AmdMi300xTest, UnknownDeviceIsUnreachable) {
  AcceleratorSample s = backend_->sample("0000:ff:00.0");
  EXPECT_FALSE(s.reachable);
  EXPECT_FALSE(s.gpu_utilization_percent);
}

TEST_P(AmdMi300xTest, Events) {
  EXPECT_TRUE(backend_->poll_events(std::chrono::milliseconds(0)).empty());

  steps_->go(1);
  auto events = backend_->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:e5:00.0");
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::other);
  EXPECT_EQ(events[0].code, 2u);  // KFD event: THERMAL_THROTTLE
  EXPECT_THAT(events[0].text, HasSubstr("thermal"));

  steps_->go(2);
  events = backend_->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:a6:00.0");
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::critical);
  EXPECT_EQ(events[0].code, 3u);  // KFD event: GPU_PRE_RESET
  EXPECT_THAT(events[0].text, HasSubstr("uncorrectable ECC error in UMC"));

  steps_->go(3);
  events = backend_->poll_events(std::chrono::milliseconds(1000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:a6:00.0");
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::other);
  EXPECT_EQ(events[0].code, 4u);  // KFD event: GPU_POST_RESET

  EXPECT_TRUE(backend_->poll_events(std::chrono::milliseconds(10)).empty());
}

TEST_P(AmdMi300xTest, PollWaitsForAnEvent) {
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    steps_->go(2);
  });
  auto events = backend_->poll_events(std::chrono::seconds(20));
  later.join();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, AcceleratorEventKind::critical);
}

TEST_P(AmdMi300xTest, GpuFallsOffTheBusAndComesBack) {
  EXPECT_TRUE(backend_->sample("0000:65:00.0").reachable);
  steps_->go(2);
  AcceleratorSample lost = backend_->sample("0000:65:00.0");
  EXPECT_FALSE(lost.reachable);
  EXPECT_FALSE(lost.gpu_utilization_percent);
  EXPECT_FALSE(lost.memory_used_bytes);
  EXPECT_FALSE(lost.gpu_temperature_c);
  EXPECT_FALSE(lost.power_watts);
  EXPECT_FALSE(lost.bad_pages_retired);
  for (const auto& id : kMi300xBusIds) {
    if (id != "0000:65:00.0") {
      EXPECT_TRUE(backend_->sample(id).reachable) << id;
    }
  }
  steps_->go(3);
  AcceleratorSample back = backend_->sample("0000:65:00.0");
  EXPECT_TRUE(back.reachable);
  EXPECT_EQ(back.gpu_temperature_c, std::optional<double>(44.0));
  EXPECT_EQ(back.sm_clock_mhz, std::optional<std::uint32_t>(132));
}

TEST_P(AmdMi300xTest, MergesIntoTheHostModel) {
  HostModel model;
  std::vector<std::unique_ptr<AcceleratorBackend>> backends;
  backends.push_back(std::move(backend_));
  auto statuses = merge_accelerators(model, backends);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].name, GetParam().backend);
  EXPECT_TRUE(statuses[0].present) << statuses[0].detail;
  ASSERT_EQ(model.accelerators.size(), 8u);
  for (const Accelerator& a : model.accelerators) {
    EXPECT_EQ(a.vendor, Vendor::amd);
    EXPECT_EQ(a.name, "AMD Instinct MI300X");
    ASSERT_TRUE(a.inventory);
    EXPECT_EQ(a.inventory->backend, GetParam().backend);
  }
  auto i = model.links.index_of("gpu0");
  auto j = model.links.index_of("gpu7");
  ASSERT_TRUE(i && j);
  EXPECT_EQ(model.links.at(*i, *j).level, LinkLevel::xgmi);
}

INSTANTIATE_TEST_SUITE_P(
    AmdBackends, AmdMi300xTest,
    ::testing::Values(AmdLibrary{"amd-smi", AMD_SMI_INJECT_LIB,
                                 std::filesystem::path(AMD_SMI_SCENARIO_DIR) / "mi300x-8x.json"},
                      AmdLibrary{"rocm-smi", ROCM_SMI_INJECT_LIB,
                                 std::filesystem::path(ROCM_SMI_SCENARIO_DIR) / "mi300x-8x.json"}),
    [](const ::testing::TestParamInfo<AmdLibrary>& param) {
      return param.param.backend == "amd-smi" ? std::string("AmdSmi") : std::string("RocmSmi");
    });

}  // namespace
}  // namespace polyaccel
