// `polyaccel mig` end to end: plans for GPUs not on this host (JSON schema, exit codes, exact
// reasons), mig-parted files, apply through the production NVML loader against the test build of
// libnvidia-ml.so.1 (8xH200 MIG scenario) including failures half way, and AMD partition modes
// on a sysfs tree the test builds.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/file_io.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using nlohmann::json;
using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::shared_dir;
using polyaccel::testing::TempDir;

const std::string kScenario = std::string(NVML_SCENARIO_DIR) + "/hgx-8xh200-mig.json";

struct MigRun {
  int exit_code;
  std::string out, err;
};

class MigCli : public ::testing::Test {
 protected:
  // Runs polyaccel with the injected NVML and `scenario`; stdout and stderr apart.
  MigRun mig(const std::string& args, const std::string& scenario = kScenario,
             const std::string& nvml = NVML_INJECT_LIB) {
    std::string err_file = (tmp_.path() / "stderr").string();
    auto r = run_command("POLYACCEL_NVML_LIB='" + nvml + "' NVML_INJECT_SCENARIO='" + scenario +
                         "' POLYACCEL_LOCK_DIR='" + tmp_.path().string() + "' " +
                         polyaccel_binary() + " mig " + args + " 2>'" + err_file + "'");
    return {r.exit_code, r.output, read_text_file(err_file).value_or("")};
  }
  static json parse(const MigRun& r) {
    json doc = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
    return doc;
  }
  TempDir tmp_;
};

TEST_F(MigCli, PlanForGpusNotOnThisHostPrintsTheSchema) {
  auto r = mig("plan --model H200 --gpus 2 1g.18gb=6 3g.71gb=2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = parse(r);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["fit"], true);
  EXPECT_EQ(doc["reason"], "");
  ASSERT_EQ(doc["gpus"].size(), 2u);
  unsigned small = 0, half = 0;
  for (size_t i = 0; i < 2; ++i) {
    const json& g = doc["gpus"][i];
    EXPECT_EQ(g["index"], i);
    EXPECT_EQ(g["model"], "H200-SXM5-141GB");
    for (const auto& inst : g["instances"]) {
      ASSERT_TRUE(inst["start"].is_number_unsigned());
      small += inst["profile"] == "1g.18gb";
      half += inst["profile"] == "3g.71gb";
      EXPECT_EQ(inst["size"], inst["profile"] == "3g.71gb" ? 4 : 1);
    }
  }
  EXPECT_EQ(small, 6u);
  EXPECT_EQ(half, 2u);
  auto text = mig("plan --model H200 --gpus 2 1g.18gb=6 3g.71gb=2");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("3g.71gb  start 4 size 4  new"), std::string::npos) << text.out;
}

TEST_F(MigCli, ImpossibleAndBadRequestsExitTwoWithOneLine) {
  auto more = mig("plan --model H200 1g.18gb=8 --json");
  EXPECT_EQ(more.exit_code, 2);
  EXPECT_EQ(parse(more)["reason"], "8 x 1g.18gb requested; a GPU holds at most 7");
  EXPECT_EQ(more.err, "polyaccel: MIG request: 8 x 1g.18gb requested; a GPU holds at most 7\n");
  auto unknown = mig("plan --model H100 1g.18gb=1");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(unknown.out.empty());
  EXPECT_NE(unknown.err.find("1g.18gb: unknown MIG profile for H100-SXM5-80GB"), std::string::npos)
      << unknown.err;
  auto syntax = mig("plan --model H200 1g.18gb");
  EXPECT_EQ(syntax.exit_code, 2);
  EXPECT_NE(syntax.err.find("expected PROFILE=COUNT"), std::string::npos);
  auto model = mig("plan --model V100 1g.5gb=1");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_NE(model.err.find("models: A100-40GB"), std::string::npos);
}

TEST_F(MigCli, MigPartedFilesAsOperatorsHaveThem) {
  std::string file = (shared_dir() / "fixtures/configs/mig-parted_config-default.yaml").string();
  auto r = mig("plan --model H200 --gpus 2 -f " + file + " -c all-balanced --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = parse(r);
  ASSERT_EQ(doc["gpus"].size(), 2u);
  EXPECT_EQ(doc["gpus"][1]["instances"].size(), 4u);
  auto foreign =
      mig("plan --model H200 -f " +
          (shared_dir() / "fixtures/configs/nvidia-device-plugin_readme-example-1.yaml").string() +
          " -c all-balanced");
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.err.find("unknown key 'flags'"), std::string::npos) << foreign.err;
  std::ofstream(tmp_.path() / "bad.yaml") << "version: v1\nmig-configs:\n  x: [\n";
  auto broken = mig("plan --model H200 -f " + (tmp_.path() / "bad.yaml").string() + " -c x");
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.err.find("bad.yaml:4"), std::string::npos) << broken.err;
  auto missing = mig("plan --model H200 -f " + file + " -c all-nothing");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("all-nothing: no such config"), std::string::npos);
}

TEST_F(MigCli, ShowListsInstancesAndBusyOnes) {
  auto r = mig("show --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = parse(r);
  ASSERT_EQ(doc["gpus"].size(), 8u);
  EXPECT_EQ(doc["gpus"][0]["model"], "H200-SXM5-141GB");
  EXPECT_EQ(doc["gpus"][2]["instances"][5]["pids"], json::array({41877}));
  EXPECT_EQ(doc["gpus"][4]["mig_enabled"], false);
  auto none = mig("show", kScenario, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_NE(none.out.find("No MIG-capable"), std::string::npos);
}

TEST_F(MigCli, ApplyGrowsAGpuChangingOnlyWhatMust) {
  json before = parse(mig("show --json"))["gpus"][0]["instances"];
  auto r = mig("apply -i 0 3g.71gb=1 1g.18gb=4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json doc = parse(r);
  EXPECT_EQ(doc["applied"], true);
  const json& res = doc["results"][0];
  ASSERT_EQ(res["destroyed"].size(), 3u);
  ASSERT_EQ(res["created"].size(), 1u);
  EXPECT_EQ(res["created"][0]["profile"], "3g.71gb");
  EXPECT_EQ(res["created"][0]["start"], 4);
  // Read back from the library: the four 1g kept their UUIDs, the 3g took slices 4..7.
  const json& after = res["instances"];
  ASSERT_EQ(after.size(), 5u);
  for (unsigned s = 0; s < 4; ++s)
    EXPECT_EQ(after[s]["uuid"], before[s]["uuid"]);
  EXPECT_EQ(after[4]["profile"], "3g.71gb");
  EXPECT_EQ(after[4]["start"], 4);
  EXPECT_EQ(after[4]["size"], 4);
}

TEST_F(MigCli, ApplyTakesAMigPartedConfig) {
  std::string file = (shared_dir() / "fixtures/configs/mig-parted_config-default.yaml").string();
  // GPU 1 holds 3g.71gb at 4 and 1g.18gb at 0..3: all-balanced keeps the 3g and two 1g.
  auto r = mig("apply -i 1,3 -f " + file + " -c all-balanced --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json doc = parse(r);
  ASSERT_EQ(doc["results"].size(), 2u);
  EXPECT_EQ(doc["results"][0]["created"].size(), 1u);    // the 2g.35gb
  EXPECT_EQ(doc["results"][0]["destroyed"].size(), 2u);  // two 1g in its way
  EXPECT_EQ(doc["results"][1]["created"].size(), 4u);
  for (const auto& res : doc["results"]) {
    std::multiset<std::string> profiles;
    for (const auto& i : res["instances"])
      profiles.insert(i["profile"].get<std::string>());
    EXPECT_EQ(profiles, (std::multiset<std::string>{"1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"}));
  }
}

TEST_F(MigCli, ApplyReportsAModeChangePendingReset) {
  auto r = mig("apply -i 4 7g.141gb=1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = parse(r);
  EXPECT_EQ(doc["pending_reset"], json::array({4}));
  EXPECT_EQ(doc["results"][0]["mode"], "pending_reset");
  EXPECT_TRUE(doc["results"][0]["created"].empty());
  // GPU 5 changes mode at once (no clients): its instance is made in the same run.
  auto now = parse(mig("apply -i 5 7g.141gb=1 --json"));
  EXPECT_EQ(now["results"][0]["mode"], "enabled");
  EXPECT_EQ(now["results"][0]["instances"].size(), 1u);
}

TEST_F(MigCli, BusyInstancesStopThePlanUnlessForced) {
  auto r = mig("apply -i 2 3g.71gb=1 1g.18gb=4 --json");
  EXPECT_EQ(r.exit_code, 1);
  json doc = parse(r);
  EXPECT_EQ(doc["fit"], false);
  EXPECT_NE(doc["reason"].get<std::string>().find("busy (pids 41877)"), std::string::npos);
  EXPECT_FALSE(doc.contains("results")) << "nothing was touched";
  // Forced, the driver still refuses to destroy an instance with processes: the run stops half
  // way and says what it did.
  auto forced = mig("apply -i 2 3g.71gb=1 1g.18gb=4 --force --json");
  EXPECT_EQ(forced.exit_code, 2);
  json f = parse(forced);
  EXPECT_EQ(f["applied"], false);
  EXPECT_NE(f["error"].get<std::string>().find("(NVML 19)"), std::string::npos) << f["error"];
  EXPECT_EQ(f["results"][0]["destroyed"].size(), 1u);
  EXPECT_EQ(f["results"][0]["instances"].size(), 6u);
  EXPECT_NE(forced.err.find("polyaccel: nvmlComputeInstanceDestroy"), std::string::npos);
}

TEST_F(MigCli, AFailureHalfWayReportsWhatWasCreated) {
  json scenario = json::parse(std::ifstream(kScenario));
  scenario["fail_gpu_instance_create_after"] = 2;
  std::string path = (tmp_.path() / "faulty.json").string();
  std::ofstream(path) << scenario.dump();
  auto r = mig("apply -i 3 1g.18gb=4 --json", path);
  EXPECT_EQ(r.exit_code, 2);
  json doc = parse(r);
  EXPECT_EQ(doc["applied"], false);
  EXPECT_EQ(doc["results"][0]["created"].size(), 2u);
  EXPECT_EQ(doc["results"][0]["instances"].size(), 2u);
  for (const auto& c : doc["results"][0]["created"])
    EXPECT_EQ(c["uuid"].get<std::string>().rfind("MIG-", 0), 0u);
}

TEST_F(MigCli, AModelOutsideTheTablesIsPlannedWithWhatNvmlLists) {
  json scenario = json::parse(std::ifstream(kScenario));
  for (auto& d : scenario["devices"]) {
    d["pci_device_id"] = "0x2fff10de";  // no table has this id or name
    d["name"] = "NVIDIA Hopper Test Board";
  }
  std::string path = (tmp_.path() / "unlisted.json").string();
  std::ofstream(path) << scenario.dump();
  auto r = mig("apply -i 3 3g.71gb=1 1g.35gb=2 --json", path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = parse(r);
  EXPECT_EQ(doc["gpus"][0]["model"], "NVIDIA Hopper Test Board");
  std::multiset<std::string> profiles;
  for (const auto& i : doc["results"][0]["instances"])
    profiles.insert(i["profile"].get<std::string>());
  EXPECT_EQ(profiles, (std::multiset<std::string>{"1g.35gb", "1g.35gb", "3g.71gb"}));
  auto off = mig("plan -i 4 1g.18gb=1", path);  // MIG off: NVML lists no profiles yet
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_NE(off.err.find("enable MIG mode first"), std::string::npos) << off.err;
}

TEST_F(MigCli, ConcurrentAppliesAreRefused) {
  std::string lock = (tmp_.path() / "polyaccel-mig.lock").string();
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto r = mig("apply -i 3 1g.18gb=1");
  ::close(fd);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("another polyaccel mig apply is running"), std::string::npos);
}

// Two MI300X functions as amdgpu shows them in sysfs (and the CPU directory every sysfs has,
// which --fsroot is checked for).
void make_amd_tree(const std::filesystem::path& root) {
  std::filesystem::create_directories(root / "sys/devices/system/cpu");
  for (const char* bdf : {"0000:0c:00.0", "0000:22:00.0"}) {
    auto dir = root / "sys/bus/pci/devices" / bdf;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "vendor") << "0x1002\n";
    std::ofstream(dir / "current_compute_partition") << "SPX\n";
    std::ofstream(dir / "current_memory_partition") << "NPS1\n";
    std::ofstream(dir / "available_compute_partition") << "SPX, DPX, QPX, CPX\n";
    std::ofstream(dir / "available_memory_partition") << "NPS1, NPS4\n";
  }
  auto nic = root / "sys/bus/pci/devices/0000:0d:00.0";  // not AMD: ignored
  std::filesystem::create_directories(nic);
  std::ofstream(nic / "vendor") << "0x15b3\n";
}

TEST_F(MigCli, AmdPartitionModesShownAndSet) {
  make_amd_tree(tmp_.path());
  std::string root = " --fsroot " + tmp_.path().string();
  auto none = "/nonexistent/libnvidia-ml.so.1";
  auto shown = mig("partition --json" + root, kScenario, none);
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  json doc = parse(shown);
  ASSERT_EQ(doc["amd"].size(), 2u);
  EXPECT_EQ(doc["amd"][0]["compute_partition"], "SPX");
  EXPECT_EQ(doc["amd"][0]["available_compute"], json::array({"SPX", "DPX", "QPX", "CPX"}));
  auto dir = tmp_.path() / "sys/bus/pci/devices/0000:0c:00.0";
  auto set = mig("partition --gpu 0000:0c:00.0 --compute cpx --memory NPS4 --json" + root,
                 kScenario, none);
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(read_first_line(dir / "current_compute_partition"), "CPX");
  EXPECT_EQ(read_first_line(dir / "current_memory_partition"), "NPS4");
  EXPECT_EQ(parse(set)["compute_partition"], "CPX");
  // SPX over NPS4 is not a valid pair: refused, nothing written.
  auto pair = mig("partition --gpu 0000:0c:00.0 --compute SPX" + root, kScenario, none);
  EXPECT_EQ(pair.exit_code, 2);
  EXPECT_NE(pair.err.find("SPX/NPS4: each compute partition must lie in one memory partition: "
                          "1 compute partitions over 4 memory partitions (NPS4 pairs with QPX, "
                          "CPX)"),
            std::string::npos)
      << pair.err;
  EXPECT_EQ(read_first_line(dir / "current_compute_partition"), "CPX");
  auto unknown = mig("partition --gpu 0000:22:00.0 --compute XPX" + root, kScenario, none);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("XPX: unknown compute partition mode"), std::string::npos);
  auto which = mig("partition --compute DPX" + root, kScenario, none);
  EXPECT_EQ(which.exit_code, 2);
  EXPECT_NE(which.err.find("2 partitionable AMD GPUs"), std::string::npos);
  auto offered = mig("partition --gpu 0000:22:00.0 --memory NPS2" + root, kScenario, none);
  EXPECT_EQ(offered.exit_code, 2);
  EXPECT_NE(offered.err.find("NPS2: not offered by 0000:22:00.0"), std::string::npos);
}

}  // namespace
}  // namespace polyaccel
