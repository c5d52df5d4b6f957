// polyaccel place / release / flavors end to end: exit codes, JSON, the state file under
// concurrent commits and kills.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/file_io.h"
#include "place/allocation_store.h"
#include "support/iommu_tree.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using testing::polyaccel_binary;
using testing::run_command;
using testing::TempDir;
using testing::topology_fixture;
using testing::xe8640_topology;

std::string place_cmd(const std::string& state, const std::string& args) {
  return polyaccel_binary() + " place --topology '" + xe8640_topology() + "' --state '" + state +
         "' " + args;
}

TEST(PlaceCli, JsonSchemaOfAFit) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  auto r = run_command(
      place_cmd(state,
                "--vcpus 8 --memory 16GiB --spec hw:cpu_policy=dedicated "
                "--spec pci_passthrough:alias=h100:1 --pci-alias h100=10de:2330 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["fit"], true);
  EXPECT_TRUE(j["reason"].is_null());
  ASSERT_EQ(j["cells"].size(), 1u);
  EXPECT_EQ(j["cells"][0]["cpu_pinning"].size(), 8u);
  EXPECT_TRUE(j["cells"][0].contains("host_numa_node"));
  EXPECT_TRUE(j["cells"][0]["page_size_bytes"].is_null());
  EXPECT_EQ(j["devices"][0]["numa_node"], j["cells"][0]["host_numa_node"]);
  EXPECT_FALSE(std::filesystem::exists(state)) << "no --commit, no state written";
}

TEST(PlaceCli, BadInputExitsTwoNamingTheKey) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  auto r = run_command(
      place_cmd(state, "--vcpus 4 --memory 8GiB --spec hw:cpu_thread_policy=isolate 2>&1"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("hw:cpu_thread_policy"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line";
  auto unknown = run_command(place_cmd(state, "--vcpus 4 --memory 8GiB --spec hw:bogus=1 2>&1"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("hw:bogus"), std::string::npos);
  auto flavor = run_command(place_cmd(state, "--flavor /nonexistent.json 2>&1"));
  EXPECT_EQ(flavor.exit_code, 2);
}

TEST(PlaceCli, NoFitExitsOneWithTheReason) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  auto r = run_command(place_cmd(state, "--vcpus 40 --memory 8GiB --spec hw:cpu_policy=dedicated"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("guest cell 0 (40 vCPUs, 8 GiB) fits no host NUMA node"),
            std::string::npos)
      << r.output;
}

TEST(PlaceCli, CommitReleaseAndForeignState) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  const std::string one_node = "--vcpus 28 --memory 8GiB --spec hw:cpu_policy=dedicated";
  for (int i = 0; i < 8; ++i) {
    auto r = run_command(place_cmd(state, one_node + " --commit --name vm" + std::to_string(i)));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  auto full = run_command(place_cmd(state, one_node + " --commit --name vm8"));
  EXPECT_EQ(full.exit_code, 1);
  auto dup = run_command(place_cmd(state, "--vcpus 1 --memory 1GiB --commit --name vm0 2>&1"));
  EXPECT_EQ(dup.exit_code, 2);
  auto rel = run_command(polyaccel_binary() + " release vm3 --topology '" + xe8640_topology() +
                         "' --state '" + state + "' --json");
  ASSERT_EQ(rel.exit_code, 0) << rel.output;
  EXPECT_EQ(nlohmann::json::parse(rel.output)["remaining"], 7);
  EXPECT_EQ(run_command(place_cmd(state, one_node + " --commit --name vm8")).exit_code, 0);
  auto list = run_command(polyaccel_binary() + " allocations --state '" + state + "' --json");
  ASSERT_EQ(list.exit_code, 0);
  auto lj = nlohmann::json::parse(list.output);
  EXPECT_EQ(lj["placements"].size(), 8u);
  EXPECT_EQ(lj["host"], "testhost-nvidia");
  EXPECT_EQ(run_command(polyaccel_binary() + " release nope --topology '" + xe8640_topology() +
                        "' --state '" + state + "' 2>&1")
                .exit_code,
            2);
  // The same state read with another host's topology is refused, and left as it was.
  auto before = *read_text_file(state);
  auto other = run_command(
      polyaccel_binary() + " place --topology '" +
      topology_fixture("2socket-2numa-36core-cpuonly-omnipath_xeon-e5-2695v4.xml").string() +
      "' --state '" + state + "' --vcpus 1 --memory 1GiB --commit --name x 2>&1");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_EQ(*read_text_file(state), before);
  // So is a release from another host: it would free PUs that host does not have.
  auto foreign_release = run_command(
      polyaccel_binary() + " release vm0 --topology '" +
      topology_fixture("2socket-2numa-36core-cpuonly-omnipath_xeon-e5-2695v4.xml").string() +
      "' --state '" + state + "' 2>&1");
  EXPECT_EQ(foreign_release.exit_code, 2) << foreign_release.output;
  EXPECT_NE(foreign_release.output.find("records placements of host"), std::string::npos);
  EXPECT_EQ(*read_text_file(state), before);
  // A bare number is bytes: refused with what it means.
  auto bytes = run_command(place_cmd(state, "--vcpus 1 --memory 4096 2>&1"));
  EXPECT_EQ(bytes.exit_code, 2);
  EXPECT_NE(bytes.output.find("4096 bytes, not a whole number of MiB"), std::string::npos)
      << bytes.output;
  // With --libvirt, a refusal goes to stderr: stdout (the XML file) stays empty.
  auto nofit = run_command(place_cmd(
      state, "--vcpus 999 --memory 1GiB --spec hw:cpu_policy=dedicated --libvirt 2>/dev/null"));
  EXPECT_EQ(nofit.exit_code, 1);
  EXPECT_EQ(nofit.output, "");
  auto said = run_command(
      place_cmd(state, "--vcpus 999 --memory 1GiB --spec hw:cpu_policy=dedicated 2>&1"));
  EXPECT_EQ(said.output.rfind("No fit: ", 0), 0u) << said.output;
}

// A guest refused for want of huge pages is told what to try, as options place takes: the
// what-if with the sizes it asked for first, then other page sizes, more NUMA nodes, less memory.
// The XE8640 capture reserves no 1 GiB pages; each of its 8 nodes has about 64 GiB.
TEST(PlaceCli, NoFitForHugePagesNamesTheWhatIfs) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  const std::string guest =
      "--vcpus 8 --memory 32GiB --spec hw:cpu_policy=dedicated --spec hw:mem_page_size=1GiB";
  auto r = run_command(place_cmd(state, guest + " 2>&1"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("No fit: ", 0), 0u) << r.output;
  for (const char* option :
       {"Short of huge pages; to try:", "--hugepages-per-node 32GiB --hugepage-size 1GiB",
        "--spec hw:mem_page_size=2MiB", "--spec hw:mem_page_size=any", "--spec hw:numa_nodes=2",
        "--memory SIZE below 32 GiB"})
    EXPECT_NE(r.output.find(option), std::string::npos) << option << "\n" << r.output;
  auto j = nlohmann::json::parse(run_command(place_cmd(state, guest + " --json")).output);
  ASSERT_TRUE(j["what_if"].is_array()) << j.dump();
  EXPECT_EQ(j["what_if"][0].get<std::string>().rfind("--hugepages-per-node 32GiB", 0), 0u);
  // The first what-if it names fits.
  auto what_if = run_command(
      place_cmd(state, guest + " --hugepages-per-node 32GiB --hugepage-size 1GiB 2>&1"));
  EXPECT_EQ(what_if.exit_code, 0) << what_if.output;
  // A refusal for CPUs names none of them.
  auto cpus = run_command(place_cmd(state,
                                    "--vcpus 999 --memory 1GiB --spec "
                                    "hw:cpu_policy=dedicated --json"));
  EXPECT_FALSE(nlohmann::json::parse(cpus.output).contains("what_if")) << cpus.output;
}

std::set<unsigned> held_pus_checked(const std::string& state, size_t& placements) {
  std::set<unsigned> pus;
  placements = 0;
  // Killed before its first commit finished: no file yet, which is the old (empty) state.
  if (!std::filesystem::exists(state)) return pus;
  auto text = read_text_file(state);
  EXPECT_TRUE(text);
  auto s = place::parse_state(state, text.value_or(""));
  EXPECT_TRUE(s) << (s ? "" : s.error().message());
  placements = s ? s->placements.size() : 0;
  if (!s) return pus;
  for (const auto& p : s->placements) {
    for (unsigned pu : p.held_pus.to_vector())
      EXPECT_TRUE(pus.insert(pu).second) << "PU " << pu << " booked twice";
  }
  return pus;
}

TEST(PlaceCli, ConcurrentCommitsNeverDoubleBook) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  // 12 processes race for 8 NUMA nodes of 28 PUs each.
  std::string script;
  for (int i = 0; i < 12; ++i)
    script +=
        place_cmd(state,
                  "--vcpus 28 --memory 8GiB --spec hw:cpu_policy=dedicated --commit --name vm" +
                      std::to_string(i)) +
        " >/dev/null 2>&1; echo $? >> '" + (tmp.path() / "rc").string() + "' &\n";
  script += "wait\n";
  std::ofstream(tmp.path() / "race.sh") << script;
  ASSERT_EQ(run_command("sh '" + (tmp.path() / "race.sh").string() + "'").exit_code, 0);
  auto rcs = *read_text_file(tmp.path() / "rc");
  EXPECT_EQ(std::count(rcs.begin(), rcs.end(), '0'), 8) << rcs;
  EXPECT_EQ(std::count(rcs.begin(), rcs.end(), '1'), 4) << rcs;
  size_t placements = 0;
  EXPECT_EQ(held_pus_checked(state, placements).size(), 8u * 28u);
  EXPECT_EQ(placements, 8u);
}

TEST(PlaceCli, AKillDuringCommitsLeavesAWholeState) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  // A stream of small commits, killed with SIGKILL at several moments.
  for (int round = 0; round < 4; ++round) {
    std::string loop =
        "i=0; while [ $i -lt 40 ]; do " +
        place_cmd(state,
                  "--vcpus 2 --memory 1GiB --spec hw:cpu_policy=dedicated --commit --name r" +
                      std::to_string(round) + "-$i") +
        " >/dev/null 2>&1; i=$((i+1)); done";
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", loop.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::usleep(static_cast<useconds_t>(60000 + 45000 * round));
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    size_t placements = 0;
    auto pus = held_pus_checked(state, placements);
    EXPECT_EQ(pus.size(), placements * 2);
    auto after = run_command(place_cmd(state,
                                       "--vcpus 2 --memory 1GiB --spec hw:cpu_policy=dedicated "
                                       "--commit --name after" +
                                           std::to_string(round)));
    EXPECT_EQ(after.exit_code, 0) << after.output;
    // The next commit clears what a killed writer left: only the state and its lock remain.
    std::set<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(tmp.path()))
      files.insert(e.path().filename().string());
    EXPECT_EQ(files, (std::set<std::string>{"s.json", "s.json.lock"}));
  }
}

TEST(PlaceCli, LibvirtOutputValidates) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  auto xml = tmp.path() / "d.xml";
  auto r = run_command(place_cmd(state,
                                 "--vcpus 8 --memory 16GiB --spec hw:cpu_policy=dedicated "
                                 "--spec hw:numa_nodes=2 --spec pci_passthrough:alias=h100:2 "
                                 "--pci-alias h100=10de:2330 --libvirt --name vm1 > '" +
                                     xml.string() + "'"));
  ASSERT_EQ(r.exit_code, 0);
  auto v = run_command("virt-xml-validate '" + xml.string() + "' domain 2>&1");
  EXPECT_EQ(v.exit_code, 0) << v.output;
}

// One port of the NEC machine's dual-port X722 (IOMMU group 40 with its switch port): the XML
// passes both functions, not the bridge, and validates.
TEST(PlaceCli, LibvirtPassesTheWholeIommuGroup) {
  TempDir tmp;
  auto root = testing::extract_tarball(
      topology_fixture("sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
      tmp.path());
  testing::add_nec_iommu_groups(root);
  auto xml = tmp.path() / "d.xml";
  auto r = run_command(polyaccel_binary() + " place --fsroot '" + root.string() + "' --state '" +
                       (tmp.path() / "s.json").string() +
                       "' --vcpus 2 --memory 1GiB --spec hw:cpu_policy=dedicated "
                       "--spec pci_passthrough:alias=x722:1 --pci-alias x722=8086:37d2 "
                       "--libvirt --name vm1 > '" +
                       xml.string() + "'");
  ASSERT_EQ(r.exit_code, 0);
  auto text = polyaccel::read_text_file(xml).value_or("");
  EXPECT_NE(text.find("bus='0x60' slot='0x00' function='0x0'"), std::string::npos) << text;
  EXPECT_NE(text.find("bus='0x60' slot='0x00' function='0x1'"), std::string::npos) << text;
  EXPECT_EQ(text.find("bus='0x5f'"), std::string::npos) << text;
  auto v = run_command("virt-xml-validate '" + xml.string() + "' domain 2>&1");
  EXPECT_EQ(v.exit_code, 0) << v.output;
}

TEST(FlavorsCli, CommandsAndJson) {
  auto r =
      run_command(polyaccel_binary() + " flavors --topology '" + xe8640_topology() + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["flavors"].size(), 3u);
  auto cpu_only =
      run_command(polyaccel_binary() + " flavors --topology '" +
                  topology_fixture("24socket-24numa-384pu-cpuonly-1xmlx4_sgi.xml").string() + "'");
  EXPECT_EQ(cpu_only.exit_code, 1);
  // A reserve the host cannot give is bad input, not "no flavor".
  auto too_many = run_command(polyaccel_binary() + " flavors --topology '" + xe8640_topology() +
                              "' --reserve-cores-per-node 20 2>&1");
  EXPECT_EQ(too_many.exit_code, 2) << too_many.output;
  auto report = run_command(polyaccel_binary() + " report --topology '" + xe8640_topology() + "'");
  EXPECT_NE(report.output.find("== Accelerator flavors =="), std::string::npos);
  EXPECT_NE(report.output.find("openstack flavor create"), std::string::npos);
}

}  // namespace
}  // namespace polyaccel
