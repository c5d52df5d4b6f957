// place, run, allocations and release beside guests libvirt runs (--libvirt-domains DIR, a status
// directory as /run/libvirt/qemu holds it) on the AWS g4dn.metal capture: node 0 is PUs
// 0-23,48-71 with 5281 pages of 2 MiB and T4s 0000:18:00.0, 19, 35, 36; node 1 the rest.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/cpuset.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using testing::polyaccel_binary;
using testing::run_command;
using testing::TempDir;
using testing::topology_fixture;
using testing::write_text;

// Nova's guest: 2 vCPUs pinned to PUs 0 and 48, every 2 MiB page of node 0, the first T4.
const char* kNovaGuest = R"(<domstatus state='running' reason='booted' pid='4242'>
  <domain type='kvm' id='7'>
    <name>instance-00000007</name>
    <memory unit='KiB'>10815488</memory>
    <memoryBacking><hugepages><page size='2048' unit='KiB' nodeset='0'/></hugepages></memoryBacking>
    <vcpu placement='static'>2</vcpu>
    <cputune>
      <vcpupin vcpu='0' cpuset='0'/>
      <vcpupin vcpu='1' cpuset='48'/>
      <emulatorpin cpuset='0,48'/>
    </cputune>
    <numatune>
      <memory mode='strict' nodeset='0'/>
      <memnode cellid='0' mode='strict' nodeset='0'/>
    </numatune>
    <cpu mode='host-passthrough'>
      <numa><cell id='0' cpus='0-1' memory='10815488' unit='KiB'/></numa>
    </cpu>
    <devices>
      <hostdev mode='subsystem' type='pci' managed='yes'>
        <source><address domain='0x0000' bus='0x18' slot='0x00' function='0x0'/></source>
      </hostdev>
    </devices>
  </domain>
</domstatus>
)";

std::string g4dn() {
  return topology_fixture("2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml").string();
}

struct LibvirtHost {
  TempDir tmp;
  std::string state = (tmp.path() / "allocations.json").string();
  std::string domains = (tmp.path() / "run/libvirt/qemu").string();
  LibvirtHost() {
    write_text(std::filesystem::path(domains) / "instance-00000007.xml", kNovaGuest);
  }

  std::string command(const std::string& subcommand, const std::string& args,
                      const std::string& domains_dir) const {
    return polyaccel_binary() + " " + subcommand + " --topology '" + g4dn() + "' --state '" +
           state + "' --libvirt-domains '" + domains_dir + "' " + args;
  }
  nlohmann::json place(const std::string& args, const std::string& domains_dir) const {
    auto r = run_command(command("place", args + " --json", domains_dir));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  }
};

const std::string kGpuRequest =
    "--vcpus 2 --memory 1GiB --spec hw:cpu_policy=dedicated --spec hw:mem_page_size=2MiB "
    "--spec pci_passthrough:alias=t4:1 --pci-alias t4=10de:1eb8";

TEST(LibvirtDomainsCli, PlaceAvoidsThePusPagesAndGpuARunningGuestHolds) {
  LibvirtHost host;
  // Counting only the state file, the fit takes node 0, PU 0 and the first T4: the very things
  // the guest holds (so this test sees the difference).
  auto blind = host.place(kGpuRequest, "none");
  ASSERT_EQ(blind["fit"], true);
  EXPECT_EQ(blind["cells"][0]["host_numa_node"], 0);
  EXPECT_EQ(blind["devices"][0]["pci_bus_id"], "0000:18:00.0");

  auto seen = host.place(kGpuRequest, host.domains);
  ASSERT_EQ(seen["fit"], true);
  EXPECT_EQ(seen["cells"][0]["host_numa_node"], 1) << "node 0's 2 MiB pages are the guest's";
  EXPECT_NE(seen["devices"][0]["pci_bus_id"], "0000:18:00.0");

  // Small pages on node 0: it fits there again, but off PUs 0 and 48 and the guest's T4.
  auto small = host.place(
      "--vcpus 2 --memory 1GiB --spec hw:cpu_policy=dedicated --spec hw:numa_nodes=1 "
      "--spec pci_passthrough:alias=t4:4 --pci-alias t4=10de:1eb8",
      host.domains);
  ASSERT_EQ(small["fit"], true) << small.dump();
  auto held = CpuSet::parse_list(small["held_pus"].get<std::string>());
  ASSERT_TRUE(held);
  EXPECT_FALSE(held->intersects(CpuSet{0, 48})) << small["held_pus"];
  EXPECT_EQ(small["cells"][0]["host_numa_node"], 1) << "node 0 has only 3 T4s free";
}

TEST(LibvirtDomainsCli, ShutOffGuestsDoNotCount) {
  LibvirtHost host;
  std::string xml = kNovaGuest;
  xml.replace(xml.find("state='running'"), 15, "state='shutoff'");
  write_text(std::filesystem::path(host.domains) / "instance-00000007.xml", xml);
  auto p = host.place(kGpuRequest, host.domains);
  EXPECT_EQ(p["cells"][0]["host_numa_node"], 0);
  EXPECT_EQ(p["devices"][0]["pci_bus_id"], "0000:18:00.0");
}

TEST(LibvirtDomainsCli, AllocationsListTheGuestAndReleaseRefusesIt) {
  LibvirtHost host;
  auto list = run_command(host.command("allocations", "", host.domains));
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("1 guests libvirt runs"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("libvirt:instance-00000007 (libvirt, read-only): 2 vCPUs "
                             "(dedicated), 10.3 GiB, NUMA 0, PUs 0,48, 0000:18:00.0"),
            std::string::npos)
      << list.output;
  auto json = run_command(host.command("allocations", "--json", host.domains));
  auto j = nlohmann::json::parse(json.output);
  ASSERT_EQ(j["placements"].size(), 1u);
  EXPECT_EQ(j["placements"][0]["owner"], "libvirt");

  auto r = run_command(host.command("release", "libvirt:instance-00000007 2>&1", host.domains));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("is a guest libvirt runs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("virsh destroy 'instance-00000007'"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(host.state)) << "nothing written";
  EXPECT_FALSE(std::filesystem::exists(host.state + ".lock")) << "nothing written";

  // Nor can a placement take a name that reads as a guest's.
  auto named = run_command(host.command(
      "place", "--vcpus 1 --memory 1GiB --commit --name libvirt:x 2>&1", host.domains));
  EXPECT_EQ(named.exit_code, 2) << named.output;
  EXPECT_NE(named.output.find("names the guests libvirt runs"), std::string::npos) << named.output;
}

TEST(LibvirtDomainsCli, RunDoesNotTakeTheGuestsGpu) {
  LibvirtHost host;
  auto blind = run_command(host.command("run", "--gpus 1 --dry-run --json -- true", "none"));
  ASSERT_EQ(blind.exit_code, 0) << blind.output;
  EXPECT_NE(blind.output.find("0000:18:00.0"), std::string::npos) << blind.output;
  auto seen = run_command(host.command("run", "--gpus 1 --dry-run --json -- true", host.domains));
  ASSERT_EQ(seen.exit_code, 0) << seen.output;
  EXPECT_EQ(seen.output.find("0000:18:00.0"), std::string::npos) << seen.output;
}

TEST(LibvirtDomainsCli, AStatusFileThatCannotBeReadIsBadInput) {
  LibvirtHost host;
  write_text(std::filesystem::path(host.domains) / "broken.xml", "<domstatus state='running'>");
  auto r = run_command(host.command("place", kGpuRequest + " 2>&1", host.domains));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("broken.xml: is not well-formed XML"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace polyaccel
