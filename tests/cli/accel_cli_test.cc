// `polyaccel topo` with the vendor libraries: test builds of NVML, AMD SMI, ROCm SMI and HLML
// loaded by the production loaders through their override variables, absent libraries and a broken
// one.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

using polyaccel::testing::kXe8640;

std::string env(const std::string& nvml, const std::string& rocm, const std::string& hlml) {
  return "POLYACCEL_AMD_SMI_LIB=/nonexistent/libamd_smi.so POLYACCEL_NVML_LIB='" + nvml +
         "' POLYACCEL_ROCM_SMI_LIB='" + rocm + "' POLYACCEL_HLML_LIB='" + hlml +
         "' NVML_INJECT_SCENARIO='" + NVML_SCENARIO_DIR + "/hgx-8xh100.json' ";
}

nlohmann::json backend(const nlohmann::json& doc, const std::string& name) {
  for (const auto& b : doc["accelerator_backends"]) {
    if (b["name"] == name) return b;
  }
  return nullptr;
}

TEST(AccelCli, InjectedNvmlFillsInventoryAndNvlinkOnTheXe8640) {
  auto r = run_command(
      env(NVML_INJECT_LIB, "/nonexistent/librocm_smi64.so.1", "/nonexistent/libhlml.so") +
      polyaccel_binary() + " topo --json --accel-backends on --topology " +
      topology_fixture(kXe8640).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(backend(doc, "nvml")["present"], true);
  EXPECT_EQ(backend(doc, "rocm-smi")["present"], false);
  EXPECT_EQ(backend(doc, "hlml")["present"], false);
  // The 4 GPUs of the capture get their inventory; the scenario's 4 others are added.
  ASSERT_EQ(doc["accelerators"].size(), 8u);
  int with_locality = 0;
  for (const auto& a : doc["accelerators"]) {
    ASSERT_TRUE(a["inventory"].is_object()) << a["pci_bus_id"];
    EXPECT_EQ(a["inventory"]["backend"], "nvml");
    EXPECT_FALSE(a["inventory"]["uuid"].get<std::string>().empty());
    EXPECT_EQ(a["inventory"]["compute_capability"], "9.0");
    with_locality += !a["numa_nodes"].empty();
  }
  EXPECT_EQ(with_locality, 4);
  // NVLink from NVML between the fixture's GPUs.
  const auto& m = doc["links"]["matrix"];
  EXPECT_EQ(m[0][0], "X");
  EXPECT_EQ(m[0][1].get<std::string>().rfind("NV", 0), 0u) << m[0][1];
}

// The AMD entry: amd-smi where its library loads, else ROCm SMI; the line says which and why.
TEST(AccelCli, AmdSmiWhereItLoadsElseRocmSmi) {
  const std::string amd = std::string("AMD_SMI_INJECT_SCENARIO='") + AMD_SMI_SCENARIO_DIR +
                          "/mi300x-8x.json' ROCM_SMI_INJECT_SCENARIO='" + ROCM_SMI_SCENARIO_DIR +
                          "/mi300x-8x.json' POLYACCEL_NVML_LIB=/nonexistent/libnvidia-ml.so.1 "
                          "POLYACCEL_HLML_LIB=/nonexistent/libhlml.so ";
  const std::string topo = polyaccel_binary() + " topo --accel-backends on --topology " +
                           topology_fixture(kXe8640).string() + " 2>&1";
  auto with_amd_smi = run_command(amd + "POLYACCEL_AMD_SMI_LIB='" + AMD_SMI_INJECT_LIB +
                                  "' POLYACCEL_ROCM_SMI_LIB='" + ROCM_SMI_INJECT_LIB + "' " + topo);
  ASSERT_EQ(with_amd_smi.exit_code, 0) << with_amd_smi.output;
  EXPECT_NE(with_amd_smi.output.find(std::string("amd-smi: 8 devices from ") + AMD_SMI_INJECT_LIB),
            std::string::npos)
      << with_amd_smi.output;
  EXPECT_NE(with_amd_smi.output.find("XGMI"), std::string::npos) << with_amd_smi.output;

  auto without = run_command(amd +
                             "POLYACCEL_AMD_SMI_LIB=/nonexistent/libamd_smi.so "
                             "POLYACCEL_ROCM_SMI_LIB='" +
                             std::string(ROCM_SMI_INJECT_LIB) + "' " + topo);
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_NE(without.output.find(std::string("rocm-smi: 8 devices from ") + ROCM_SMI_INJECT_LIB),
            std::string::npos)
      << without.output;
  EXPECT_NE(without.output.find("amd-smi absent"), std::string::npos) << without.output;
  EXPECT_NE(without.output.find("ROCm SMI used"), std::string::npos) << without.output;
}

TEST(AccelCli, NoLibraryAtAllIsOneInfoLineEach) {
  auto r = run_command(env("/nonexistent/libnvidia-ml.so.1", "/nonexistent/librocm_smi64.so.1",
                           "/nonexistent/libhlml.so") +
                       polyaccel_binary() + " topo --accel-backends on --topology " +
                       topology_fixture(kXe8640).string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nvml: absent"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rocm-smi: absent"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hlml: absent"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4 accelerators"), std::string::npos);
}

TEST(AccelCli, ALibraryPathThatIsNotALibraryIsReportedAndTheRestRuns) {
  TempDir dir;
  auto fake = dir.path() / "libnvidia-ml.so.1";
  std::ofstream(fake) << "this is not an ELF file\n";
  auto r =
      run_command(env(fake.string(), "/nonexistent/librocm_smi64.so.1", "/nonexistent/libhlml.so") +
                  polyaccel_binary() + " topo --json --accel-backends on --topology " +
                  topology_fixture(kXe8640).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  auto nvml = backend(doc, "nvml");
  EXPECT_EQ(nvml["present"], false);
  EXPECT_NE(nvml["detail"].get<std::string>().find(fake.string()), std::string::npos);
  EXPECT_NE(nvml["detail"].get<std::string>().find("not a loadable"), std::string::npos);
  EXPECT_EQ(doc["accelerators"].size(), 4u);
}

TEST(AccelCli, CapturedMachinesDoNotAskTheLibrariesByDefault) {
  auto r = run_command(env(NVML_INJECT_LIB, "/x", "/x") + polyaccel_binary() +
                       " topo --json --topology " + topology_fixture(kXe8640).string());
  ASSERT_EQ(r.exit_code, 0);
  auto doc = nlohmann::json::parse(r.output);
  EXPECT_TRUE(doc["accelerator_backends"].empty());
  EXPECT_EQ(doc["accelerators"].size(), 4u);
  EXPECT_TRUE(doc["accelerators"][0]["inventory"].is_null());
}

TEST(AccelCli, AuditReportsWhatTheInjectedNvmlSays) {
  auto r = run_command(env(NVML_INJECT_LIB, "/x", "/x") + polyaccel_binary() +
                       " audit --json --accel-backends on --only gpu.persistence gpu.mig-pending "
                       "gpu.clocks-throttled --topology " +
                       topology_fixture(kXe8640).string());
  ASSERT_EQ(r.exit_code, 1) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  std::vector<std::string> found;
  for (const auto& f : doc["findings"])
    found.push_back(f["id"].get<std::string>() + " " + f["subject"].get<std::string>());
  // Step 0 of the scenario: idle (gpu_idle is no slowdown), 2a:00.0 without persistence mode,
  // cb:00.0 with MIG pending.
  EXPECT_EQ(found, (std::vector<std::string>{"gpu.mig-pending 0000:cb:00.0 (gpu6)",
                                             "gpu.persistence 0000:2a:00.0 (gpu1)"}));
  // Without the library the GPU checks have nothing to say.
  auto none = run_command(env("/nonexistent/libnvidia-ml.so.1", "/x", "/x") + polyaccel_binary() +
                          " audit --json --accel-backends on --only gpu.persistence --topology " +
                          topology_fixture(kXe8640).string());
  EXPECT_EQ(none.exit_code, 0) << none.output;
}

}  // namespace
}  // namespace polyaccel
