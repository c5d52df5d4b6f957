// The GPU checks on what the vendor library says: our test build of libnvidia-ml.so.1
// (tests/inject/nvml) with the 8×H100 HGX scenario, loaded by the production loader, merged into
// the XE8640 capture and sampled step by step.
#include <dlfcn.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "audit/audit.h"
#include "discover/accel/backends.h"
#include "discover/discover.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using ::testing::HasSubstr;

class GpuChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
    ::setenv("NVML_INJECT_SCENARIO", (std::string(NVML_SCENARIO_DIR) + "/hgx-8xh100.json").c_str(),
             1);
    ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent/librocm_smi64.so.1", 1);
    ::setenv("POLYACCEL_HLML_LIB", "/nonexistent/libhlml.so", 1);
    DiscoverOptions o;
    o.topology_xml = polyaccel::testing::topology_fixture(
                         "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml")
                         .string();
    o.backends = BackendMode::on;
    auto m = discover_host(o);
    ASSERT_TRUE(m) << m.error().message();
    model_ = *m;
    backend_ = make_nvml_backend();
    ASSERT_TRUE(backend_->open());
    control_ = ::dlopen(NVML_INJECT_LIB, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    ASSERT_NE(control_, nullptr) << ::dlerror();
  }
  void TearDown() override {
    backend_.reset();
    if (control_) ::dlclose(control_);
  }

  std::vector<Finding> audit_at(unsigned step) {
    auto set_step =
        reinterpret_cast<void (*)(unsigned)>(::dlsym(control_, "polyaccel_inject_set_step"));
    set_step(step);
    std::vector<AcceleratorSample> samples;
    for (const auto& a : model_.accelerators)
      samples.push_back(backend_->sample(a.pci.address.to_string()));
    TuningFacts none;
    return run_audit({model_, none, samples, {}},
                     {"gpu.persistence", "gpu.ecc", "gpu.mig-pending", "gpu.clocks-throttled",
                      "gpu.row-remap-pending"});
  }

  HostModel model_;
  std::unique_ptr<AcceleratorBackend> backend_;
  void* control_ = nullptr;
};

std::vector<std::string> ids_and_subjects(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const auto& f : findings)
    out.push_back(f.id + " " + f.subject);
  return out;
}

TEST_F(GpuChecks, IdleNodeShowsPersistenceAndPendingMig) {
  auto f = audit_at(0);
  // Step 0 is idle: gpu_idle is not a slowdown.
  EXPECT_THAT(ids_and_subjects(f),
              ::testing::UnorderedElementsAre("gpu.persistence 0000:2a:00.0 (gpu1)",
                                              "gpu.mig-pending 0000:cb:00.0 (gpu6)"));
  auto persistence =
      std::find_if(f.begin(), f.end(), [](const Finding& x) { return x.id == "gpu.persistence"; });
  ASSERT_NE(persistence, f.end());
  EXPECT_THAT(persistence->remedy.commands, ::testing::Contains("nvidia-smi -i 1 -pm 1"));
  auto mig =
      std::find_if(f.begin(), f.end(), [](const Finding& x) { return x.id == "gpu.mig-pending"; });
  ASSERT_NE(mig, f.end());
  EXPECT_EQ(mig->observed, "MIG mode off, on pending a GPU reset");
}

TEST_F(GpuChecks, PowerCapUnderTrainingIsInformation) {
  auto f = audit_at(1);
  auto throttled = std::find_if(f.begin(), f.end(),
                                [](const Finding& x) { return x.id == "gpu.clocks-throttled"; });
  ASSERT_NE(throttled, f.end());
  EXPECT_EQ(throttled->subject, "0000:4e:00.0 (gpu2)");
  EXPECT_EQ(throttled->severity, Severity::info);
  EXPECT_EQ(throttled->observed, "clocks held down by sw_power_cap (SM 1755 MHz)");
  EXPECT_THAT(throttled->remedy.summary, HasSubstr("700 W"));
}

TEST_F(GpuChecks, PendingRowRemapAfterAnUncorrectableError) {
  auto f = audit_at(3);
  auto remap = std::find_if(f.begin(), f.end(),
                            [](const Finding& x) { return x.id == "gpu.row-remap-pending"; });
  ASSERT_NE(remap, f.end());
  EXPECT_EQ(remap->subject, "0000:ab:00.0 (gpu5)");
  EXPECT_EQ(remap->severity, Severity::warning);
  // Before the error (step 0) no remap was pending.
  auto later = audit_at(0);
  EXPECT_TRUE(std::none_of(later.begin(), later.end(),
                           [](const Finding& x) { return x.id == "gpu.row-remap-pending"; }));
}

TEST_F(GpuChecks, EccTurnedOffOrAboutToBe) {
  for (auto& a : model_.accelerators) {
    if (a.id == "gpu0") a.inventory->ecc_enabled = false;
    if (a.id == "gpu3") a.inventory->ecc_pending = false;
  }
  auto f = audit_at(0);
  std::vector<std::string> ecc;
  for (const auto& x : f) {
    if (x.id == "gpu.ecc") ecc.push_back(x.subject + ": " + x.observed);
  }
  EXPECT_THAT(ecc, ::testing::ElementsAre("0000:18:00.0 (gpu0): ECC off (on after the next reset)",
                                          "0000:5f:00.0 (gpu3): ECC on, off after the next reset"));
}

TEST_F(GpuChecks, NoBackendNoGpuFindings) {
  for (auto& a : model_.accelerators)
    a.inventory.reset();
  EXPECT_TRUE(audit_at(1).empty());
}

}  // namespace
}  // namespace polyaccel
