// `polyaccel audit` as users run it: on a real gathered machine (the NEC Vector Engine tree)
// made to show problems, on the live host (checked against `cat` of the same files), --emit,
// --fix on a tree and on this machine's hugepages, bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "audit/fake_host.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::read_text;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

const std::set<std::string> kIds = {"audit.limits",
                                    "hugepages.reserved",
                                    "hugepages.1g-runtime",
                                    "hugepages.mount",
                                    "numa.balancing",
                                    "numa.pci-locality-unknown",
                                    "cpu.governor",
                                    "cpu.isolation",
                                    "iommu.enabled",
                                    "iommu.passthrough",
                                    "pcie.link-degraded",
                                    "pcie.acs-redirect",
                                    "gpudirect.peer-memory",
                                    "gpudirect.nic-distance",
                                    "vfio.binding",
                                    "gpu.persistence",
                                    "gpu.ecc",
                                    "gpu.mig-pending",
                                    "gpu.clocks-throttled",
                                    "gpu.row-remap-pending",
                                    "memory.swap",
                                    "runtime.cdi-disabled",
                                    "runtime.cdi-spec-missing",
                                    "runtime.cdi-spec-stale",
                                    "runtime.driver-mismatch",
                                    "runtime.fabricmanager",
                                    "runtime.persistenced",
                                    "runtime.toolkit-missing"};

// Every finding has a known id, a severity, and says what, where and how to fix.
void expect_well_formed(const nlohmann::json& doc) {
  EXPECT_EQ(doc["schema_version"], 1);
  int counted = 0;
  for (const auto& f : doc["findings"]) {
    EXPECT_EQ(kIds.count(f["id"].get<std::string>()), 1u) << f["id"];
    std::string severity = f["severity"];
    EXPECT_TRUE(severity == "critical" || severity == "warning" || severity == "info");
    EXPECT_FALSE(f["subject"].get<std::string>().empty()) << f["id"];
    EXPECT_FALSE(f["observed"].get<std::string>().empty()) << f["id"];
    EXPECT_FALSE(f["expected"].get<std::string>().empty()) << f["id"];
    EXPECT_FALSE(f["remedy"]["summary"].get<std::string>().empty()) << f["id"];
    for (const char* key :
         {"kernel_args", "sysctls", "modprobe", "modules_load", "systemd", "runtime", "commands"}) {
      EXPECT_TRUE(f["remedy"][key].is_array()) << key;
    }
    ++counted;
  }
  EXPECT_EQ(doc["counts"]["critical"].get<int>() + doc["counts"]["warning"].get<int>() +
                doc["counts"]["info"].get<int>(),
            counted);
}

nlohmann::json only(const nlohmann::json& doc, const std::string& id) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : doc["findings"]) {
    if (f["id"] == id) out.push_back(f);
  }
  return out;
}

struct CommandResultJson {
  int exit_code;
  std::string output;
  nlohmann::json doc;
};

class AuditCli : public polyaccel::testing::NecTreeTest {
 protected:
  void SetUp() override {
    root_ = tree_root();
    // A hypervisor gone wrong: node 1's hugepages gone, NUMA balancing on, power saving.
    write_tree("sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages", "0\n");
    write_tree("proc/sys/kernel/numa_balancing", "1\n");
    for (int cpu : {0, 1, 16})
      write_tree("sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/scaling_governor",
                 "powersave\n");
  }
  CommandResultJson audit(const std::string& args) {
    auto r = run_command(polyaccel_binary() + " audit --root '" + root_.string() + "' " + args);
    CommandResultJson out{r.exit_code, r.output, nullptr};
    if (args.find("--json") != std::string::npos && !r.output.empty()) {
      out.doc = nlohmann::json::parse(r.output, nullptr, false);
    }
    return out;
  }
  fs::path root_;
};

TEST_F(AuditCli, JsonOnTheGatheredTreeOfAHypervisor) {
  auto r = audit("--role hypervisor --pinned-cpus 2-7 --json");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  expect_well_formed(r.doc);
  EXPECT_EQ(r.doc["role"], "hypervisor");
  EXPECT_EQ(r.doc["pinned_cpus"], "2-7");
  EXPECT_EQ(r.doc["host"], "ve");
  auto hp = only(r.doc, "hugepages.reserved");
  ASSERT_EQ(hp.size(), 1u);
  EXPECT_EQ(hp[0]["subject"], "node1");
  EXPECT_EQ(hp[0]["remedy"]["runtime"][0]["path"],
            "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages");
  EXPECT_EQ(only(r.doc, "numa.balancing").size(), 1u);
  EXPECT_EQ(only(r.doc, "iommu.enabled").size(), 1u);
  EXPECT_EQ(only(r.doc, "memory.swap").size(), 1u);
  // 0, 1 and 16 are not pinned but serve the Vector Engines of node 0.
  auto gov = only(r.doc, "cpu.governor");
  ASSERT_EQ(gov.size(), 1u);
  EXPECT_EQ(gov[0]["subject"], "cpus 0-1,16");
  EXPECT_EQ(gov[0]["remedy"]["runtime"].size(), 3u);
  // Most severe first.
  EXPECT_EQ(r.doc["findings"][0]["severity"], "critical");
}

TEST_F(AuditCli, TextForPeopleAndTheExitCodes) {
  auto r = audit("--role hypervisor");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("CRITICAL  iommu.enabled  kernel"));
  EXPECT_THAT(r.output, HasSubstr("kernel command line: intel_iommu=on iommu=pt"));
  // Only what is asked, and the threshold the user chose.
  EXPECT_EQ(audit("--role hypervisor --only memory.swap --fail-on critical").exit_code, 0);
  EXPECT_EQ(audit("--role hypervisor --only memory.swap").exit_code, 1);
  EXPECT_EQ(audit("--role compute --only memory.swap --json").doc["findings"].size(), 0u);
}

// issue 32: a capture without most facts says how many checks ran and which could not, in text
// and --json: "No findings." of half a capture is not a clean host.
TEST(AuditCliCoverage, HalfACaptureSaysWhatItCouldNotCheck) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "sys/devices/system/cpu");
  std::string args = polyaccel_binary() + " audit --topology " +
                     topology_fixture(polyaccel::testing::kXe8640).string() + " --root " +
                     tmp.path().string() + " --only numa.balancing memory.swap cpu.isolation";
  auto text = run_command(args);
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("0 findings, 0 of 3 checks ran (3 lack a fact"));
  EXPECT_THAT(text.output, HasSubstr("No findings in the checks that ran."));
  EXPECT_THAT(text.output, HasSubstr("numa.balancing  needs proc/sys/kernel/numa_balancing"));
  EXPECT_EQ(text.output.find("No findings.\n"), std::string::npos) << text.output;
  auto json = run_command(args + " --json");
  auto j = nlohmann::json::parse(json.output);
  EXPECT_EQ(j["checks"]["total"], 3);
  EXPECT_EQ(j["checks"]["ran"], 0);
  ASSERT_EQ(j["checks"]["unchecked"].size(), 3u);
  EXPECT_EQ(j["checks"]["unchecked"][0]["id"], "numa.balancing");
  EXPECT_EQ(j["checks"]["unchecked"][0]["missing_fact"], "proc/sys/kernel/numa_balancing");
}

TEST_F(AuditCli, BadInputIsOneLineAndExitTwo) {
  for (const std::string args :
       {"--only numa.balance", "--fail-on loud", "--role router", "--pinned-cpus 3-x",
        "--passthrough 3b:00", "--hugepages-per-node lots", "--hugepage-size 3MiB"}) {
    auto r = run_command(polyaccel_binary() + " audit --root '" + root_.string() + "' " + args +
                         " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("polyaccel: --")) << r.output;
  }
  auto missing = run_command(polyaccel_binary() + " audit --root /nonexistent/x 2>&1");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("/nonexistent/x"));
  auto xml_fix = run_command(
      polyaccel_binary() + " audit --fix --topology " +
      topology_fixture("2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml").string() +
      " 2>&1");
  EXPECT_EQ(xml_fix.exit_code, 2);
}

TEST_F(AuditCli, EmitWritesReviewableFilesAndNothingElse) {
  std::string before = run_command("cd '" + root_.string() +
                                   "' && find . -type f | sort | "
                                   "xargs md5sum")
                           .output;
  TempDir out;
  auto r = audit("--role hypervisor --pinned-cpus 2-7 --emit '" + out.path().string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  std::string after = run_command("cd '" + root_.string() +
                                  "' && find . -type f | sort | "
                                  "xargs md5sum")
                          .output;
  EXPECT_EQ(before, after);  // the audited tree is untouched

  auto unit = read_text(out.path() / "systemd/polyaccel-hugepages.service");
  EXPECT_THAT(unit, HasSubstr("ExecStart=/bin/sh -c 'echo 2048 > "
                              "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/"
                              "nr_hugepages'"));
  EXPECT_THAT(unit, HasSubstr("[Install]"));
  EXPECT_THAT(read_text(out.path() / "sysctl.d/90-polyaccel.conf"),
              HasSubstr("kernel.numa_balancing = 0\n"));
  auto cmdline = read_text(out.path() / "kernel-cmdline.txt");
  EXPECT_THAT(cmdline, HasSubstr("intel_iommu=on iommu=pt nohz_full=2-7 rcu_nocbs=2-7\n"));
  EXPECT_THAT(read_text(out.path() / "systemd/system.conf.d/90-polyaccel.conf"),
              HasSubstr("[Manager]\nCPUAffinity=0-1 8-31\n"));
  EXPECT_THAT(read_text(out.path() / "commands.sh"), HasSubstr("swapoff -a"));
  EXPECT_FALSE(fs::exists(out.path() / "modprobe.d/polyaccel.conf"));  // nothing to say there
}

TEST_F(AuditCli, FixAppliesWhatIsSafeNowAndSaysWhatWaitsForAReboot) {
  auto r = audit("--role hypervisor --pinned-cpus 0-7,16-23 --fix --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // the IOMMU still waits for a reboot
  ASSERT_TRUE(r.doc.is_object()) << r.output;
  EXPECT_EQ(read_text(root_ / "sys/devices/system/node/node1/hugepages/hugepages-2048kB/"
                              "nr_hugepages"),
            "2048\n");
  EXPECT_EQ(read_text(root_ / "proc/sys/kernel/numa_balancing"), "0\n");
  EXPECT_EQ(read_text(root_ / "sys/devices/system/cpu/cpu16/cpufreq/scaling_governor"),
            "performance\n");
  EXPECT_EQ(r.doc["fix"]["applied"].size(), 5u);  // hugepages, balancing, 3 governors
  EXPECT_TRUE(r.doc["fix"]["failed"].empty());
  std::set<std::string> pending;
  for (const auto& p : r.doc["fix"]["pending"])
    pending.insert(p["id"]);
  EXPECT_EQ(pending.count("iommu.enabled"), 1u);
  EXPECT_EQ(pending.count("hugepages.reserved"), 0u);
  // The findings printed are what is left after the fix.
  EXPECT_TRUE(only(r.doc, "hugepages.reserved").empty());
  EXPECT_TRUE(only(r.doc, "numa.balancing").empty());
  EXPECT_TRUE(only(r.doc, "cpu.governor").empty());
  EXPECT_EQ(only(r.doc, "iommu.enabled").size(), 1u);
}

TEST(AuditLive, RunsAndAgreesWithTheFilesItRead) {
  auto r = run_command(polyaccel_binary() + " audit --json --role hypervisor");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  expect_well_formed(doc);
  EXPECT_EQ(doc["source"], "live");
  // Swap: a finding exactly when /proc/swaps lists a device.
  auto swaps = run_command("tail -n +2 /proc/swaps | wc -l").output;
  EXPECT_EQ(only(doc, "memory.swap").size(), std::stoi(swaps) > 0 ? 1u : 0u);
  // IOMMU: a finding exactly when the kernel shows none.
  auto iommu = run_command(
                   "ls /sys/class/iommu /sys/kernel/iommu_groups 2>/dev/null | grep -v "
                   "'^/\\|^$' | wc -l")
                   .output;
  EXPECT_EQ(only(doc, "iommu.enabled").size(), std::stoi(iommu) == 0 ? 1u : 0u);
  // Hugepages: "none on any node" exactly when every node's pools read 0. Another test of this
  // program (AuditLive.FixReservesHugepages...) holds pages on this machine for a moment: the
  // two take one lock (reading the pools around the audit alone let a reserve-and-restore
  // between the two reads through), and the pools are still compared around the audit.
  polyaccel::testing::HostStateLock hugepages_lock("hugepages");
  auto pools = [] {
    return run_command(
               "cat /sys/devices/system/node/node*/hugepages/*/nr_hugepages | awk '{s+=$1} "
               "END {print s+0}'")
        .output;
  };
  for (int attempt = 1;; ++attempt) {
    const std::string before = pools();
    auto h = run_command(polyaccel_binary() +
                         " audit --json --role hypervisor --only hugepages.reserved");
    if (pools() != before && attempt < 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    ASSERT_TRUE(h.exit_code == 0 || h.exit_code == 1) << h.output;
    auto hdoc = nlohmann::json::parse(h.output);
    bool none_host = false;
    for (const auto& f : only(hdoc, "hugepages.reserved"))
      none_host = none_host || f["subject"] == "host";
    EXPECT_EQ(none_host, std::stoull(before) == 0) << before;
    break;
  }
  // Governors: each CPU named really runs that governor.
  for (const auto& f : only(doc, "cpu.governor")) {
    std::string governor = f["observed"].get<std::string>().substr(17);
    for (const auto& w : f["remedy"]["runtime"]) {
      EXPECT_EQ(run_command("cat " + w["path"].get<std::string>()).output, governor + "\n");
    }
  }
  // NUMA balancing: only when the file says it is on.
  if (!only(doc, "numa.balancing").empty()) {
    EXPECT_NE(run_command("cat /proc/sys/kernel/numa_balancing").output, "0\n");
  }
  // `report` carries the same findings.
  auto report = run_command(polyaccel_binary() + " report --json");
  ASSERT_EQ(report.exit_code, 0);
  auto rdoc = nlohmann::json::parse(report.output);
  expect_well_formed(rdoc["audit"]);
}

TEST(AuditLive, FixReservesHugepagesOnThisMachineAndTheTestRestoresThem) {
  polyaccel::testing::HostStateLock hugepages_lock("hugepages");
  const fs::path nodes = "/sys/devices/system/node";
  std::map<std::string, std::string> old;
  for (const auto& e : fs::directory_iterator(nodes)) {
    std::string name = e.path().filename().string();
    if (name.rfind("node", 0) != 0 || !std::isdigit(static_cast<unsigned char>(name[4]))) continue;
    fs::path nr = e.path() / "hugepages/hugepages-2048kB/nr_hugepages";
    if (::access(nr.c_str(), W_OK) != 0) GTEST_SKIP() << nr << " is not writable here";
    old[nr.string()] = read_text(nr);
  }
  ASSERT_FALSE(old.empty());
  std::uint64_t most = 0;
  for (const auto& [path, value] : old)
    most = std::max<std::uint64_t>(most, std::stoull(value));
  const std::uint64_t want = most + 8;  // 16 MiB more than any node has
  auto r =
      run_command(polyaccel_binary() + " audit --only hugepages.reserved --hugepages-per-node " +
                  std::to_string(want * 2) + "MiB --fix --json");
  for (const auto& [path, value] : old) {
    std::string now = read_text(path);
    std::ofstream(path) << value;  // restore before anything can fail
    EXPECT_EQ(now, std::to_string(want) + "\n") << path;
    EXPECT_EQ(read_text(path), value) << path << " not restored";
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["fix"]["applied"].size(), old.size());
  EXPECT_TRUE(doc["findings"].empty());
}

}  // namespace
}  // namespace polyaccel
