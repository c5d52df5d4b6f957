// `promtool check metrics` on what the agent serves for the three test scenarios. Our own
// families (polyaccel_*) pass with no finding. The compatibility families keep the peers' names
// exactly, and promtool objects to some of their habits: the test lists exactly those findings
// and fails on any other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::run_command;

// `polyaccel agent --once` with one test vendor library; returns the exposition text.
std::string scrape_once(const std::string& env, const std::string& compat) {
  std::string cmd =
      "POLYACCEL_NVML_LIB=/nonexistent POLYACCEL_ROCM_SMI_LIB=/nonexistent "
      "POLYACCEL_HLML_LIB=/nonexistent " +
      env + " '" + polyaccel::testing::polyaccel_binary() +
      "' agent --once --accel-backends on --interval 100ms --compat " + compat +
      " --pod-resources-socket ''";
  auto r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd;
  return r.output;
}

// One scrape per scenario (one vendor each).
std::vector<std::string> all_scenarios(const std::string& compat) {
  const std::string inject = INJECT_DIR;
  const std::string scenarios = SCENARIO_DIR;
  return {scrape_once("POLYACCEL_NVML_LIB=" + inject +
                          "/nvml/libnvidia-ml.so.1 NVML_INJECT_SCENARIO=" + scenarios +
                          "/nvml/scenarios/hgx-8xh100.json",
                      compat),
          scrape_once("POLYACCEL_ROCM_SMI_LIB=" + inject +
                          "/rocm_smi/librocm_smi64.so.1 ROCM_SMI_INJECT_SCENARIO=" + scenarios +
                          "/rocm_smi/scenarios/mi300x-8x.json",
                      compat),
          scrape_once("POLYACCEL_HLML_LIB=" + inject + "/hlml/libhlml.so HLML_INJECT_SCENARIO=" +
                          scenarios + "/hlml/scenarios/gaudi2-8x.json",
                      compat)};
}

// promtool's findings over every scrape, one "metric finding" line each, without repeats;
// `exit_code` is the highest promtool gave.
std::set<std::string> promtool_findings(const std::vector<std::string>& scrapes, int* exit_code) {
  polyaccel::testing::TempDir tmp;
  std::set<std::string> out;
  *exit_code = 0;
  for (const auto& text : scrapes) {
    auto file = tmp.path() / "metrics.txt";
    std::ofstream(file) << text;
    auto r = run_command("promtool check metrics < '" + file.string() + "' 2>&1");
    *exit_code = std::max(*exit_code, r.exit_code);
    std::istringstream in(r.output);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) out.insert(line);
    }
  }
  return out;
}

TEST(Promtool, OwnFamiliesHaveNoFinding) {
  auto scrapes = all_scenarios("none");
  ASSERT_NE(scrapes[0].find("vendor=\"nvidia\""), std::string::npos);
  ASSERT_NE(scrapes[1].find("vendor=\"amd\""), std::string::npos);
  ASSERT_NE(scrapes[2].find("vendor=\"intel-gaudi\""), std::string::npos);
  int rc = -1;
  auto findings = promtool_findings(scrapes, &rc);
  EXPECT_TRUE(findings.empty()) << *findings.begin();
  EXPECT_EQ(rc, 0);
}

TEST(Promtool, CompatibilityFamiliesHaveExactlyTheirPeersFindings) {
  const std::string camel_label = " label names should be written in 'snake_case' not 'camelCase'";
  const std::string camel_name = " metric names should be written in 'snake_case' not 'camelCase'";
  const std::string no_total = " counter metrics should have \"_total\" suffix";
  std::set<std::string> expected;
  // DCGM-exporter: the modelName label on every family, counters without _total.
  for (const char* gauge :
       {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"})
    expected.insert(gauge + camel_label);
  for (const char* counter :
       {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"}) {
    expected.insert(counter + camel_label);
    expected.insert(counter + no_total);
  }
  expected.insert("DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'");
  // AMD device-metrics-exporter: gauges named like counters.
  expected.insert("gpu_nodes_total non-counter metrics should not have \"_total\" suffix");
  expected.insert("gpu_ecc_correct_total non-counter metrics should not have \"_total\" suffix");
  expected.insert("gpu_ecc_uncorrect_total non-counter metrics should not have \"_total\" suffix");
  expected.insert(
      "pcie_replay_count non-histogram and non-summary metrics should not have \"_count\" suffix");
  expected.insert(
      "gpu_violation_current_accumulated_counter metric name should not include type 'counter'");
  // Gaudi's exporter: milliwatts spelled mW, a gauge named like a counter.
  expected.insert("habanalabs_power_mW" + camel_name);
  expected.insert("habanalabs_power_default_limit_mW" + camel_name);
  expected.insert(
      "habanalabs_pcie_replay_count non-histogram and non-summary metrics should not have "
      "\"_count\" suffix");

  int rc = -1;
  auto findings = promtool_findings(all_scenarios("all"), &rc);
  EXPECT_EQ(rc, 3);  // lint problems, not a parse error
  for (const auto& f : findings)
    EXPECT_TRUE(expected.count(f)) << "unexpected finding: " << f;
  for (const auto& e : expected)
    EXPECT_TRUE(findings.count(e)) << "missing finding: " << e;
}

}  // namespace
}  // namespace polyaccel
