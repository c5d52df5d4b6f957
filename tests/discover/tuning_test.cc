// The tuning facts reader: kernel formats parsed as the kernel writes them, on trees the test
// builds and on the gathered sysfs trees of ../shared/fixtures/topologies.
#include "discover/tuning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fstream>

#include "audit/fake_host.h"
#include "discover/hwloc_source.h"

namespace polyaccel {
namespace {

using polyaccel::testing::FakeHost;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;
using ::testing::ElementsAre;
using ::testing::Pair;

TEST(TuningFacts, KernelCommandLineAsTheKernelSplitsIt) {
  auto args = parse_kernel_cmdline(
      "BOOT_IMAGE=/vmlinuz-6.1.0 root=UUID=a26d ro quiet isolcpus=managed_irq,domain,2-15 "
      "dyndbg=\"file x.c +p\" iommu=pt iommu=off -- --init-arg=1\n");
  EXPECT_THAT(
      args,
      ElementsAre(Pair("BOOT_IMAGE", "/vmlinuz-6.1.0"), Pair("root", "UUID=a26d"), Pair("ro", ""),
                  Pair("quiet", ""), Pair("isolcpus", "managed_irq,domain,2-15"),
                  Pair("dyndbg", "file x.c +p"), Pair("iommu", "pt"), Pair("iommu", "off")));
  TuningFacts f;
  f.kernel_args = args;
  EXPECT_EQ(f.kernel_arg("iommu"), "off");  // the last one wins
  EXPECT_EQ(f.kernel_arg("quiet"), "");
  EXPECT_EQ(f.kernel_arg("nohz_full"), std::nullopt);
}

TEST(TuningFacts, KernelReleaseComparedByItsLeadingNumbers) {
  TuningFacts f;
  f.kernel_release = "6.1.0-18-amd64";
  EXPECT_TRUE(f.kernel_at_least(5, 12));
  EXPECT_TRUE(f.kernel_at_least(6, 1));
  EXPECT_FALSE(f.kernel_at_least(6, 2));
  f.kernel_release = "5.15.0-91-generic";
  EXPECT_FALSE(f.kernel_at_least(5, 16));
  f.kernel_release = "5.16";
  EXPECT_TRUE(f.kernel_at_least(5, 16));
  f.kernel_release = "4.14.0-49.el7a.bz1553205.page_fault_hang.ppc64le";
  EXPECT_FALSE(f.kernel_at_least(5, 12));
  // Host text we did not choose: unknown, never wrapped into a small or large version.
  for (const char* hostile : {"", "6", "6.", ".6", "4294967302.1", "99999999999999999999.1",
                              "5.4294967312", "-1.0", "+6.1", " 6.1", "6 .1", "0x6.1"}) {
    f.kernel_release = hostile;
    EXPECT_FALSE(f.kernel_at_least(0, 0)) << hostile;
  }
}

TEST(TuningFacts, AcsControlFromTheExtendedConfigSpace) {
  EXPECT_EQ(find_acs_control(FakeHost::config_with_acs(0x001d)), 0x001d);
  EXPECT_EQ(find_acs_control(std::string(256, '\0')), std::nullopt);   // not root
  EXPECT_EQ(find_acs_control(std::string(4096, '\0')), std::nullopt);  // no capabilities
  // A list that points back at itself ends.
  std::string loop(4096, '\0');
  loop[0x100] = 0x01;
  loop[0x102] = 0x01;
  loop[0x103] = 0x10;  // next = 0x100
  EXPECT_EQ(find_acs_control(loop), std::nullopt);
}

TEST(TuningFacts, EveryFactFromABuiltTree) {
  FakeHost h;
  h.write("proc/cmdline", "ro nohz_full=4-7\n");
  h.write("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
  h.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\n");
  h.write("proc/sys/kernel/numa_balancing", "1\n");
  h.write("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave\n");
  h.write("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "performance\n");
  h.write("sys/devices/system/cpu/isolated", "2-3\n");
  h.write("sys/devices/system/cpu/nohz_full", "4-7\n");
  h.write("etc/systemd/system.conf", "[Manager]\nCPUAffinity=0,1 8-9\n");
  h.write("etc/systemd/system.conf.d/50-reset.conf", "[Manager]\nCPUAffinity=\n");
  h.write("etc/systemd/system.conf.d/60-host.conf", "[Manager]\nCPUAffinity=0 1\n");
  h.write("etc/modprobe.d/vfio.conf",
          "# GPUs for guests\noptions vfio-pci ids=10de:2330\n"
          "softdep nvidia pre: vfio-pci\n");
  h.write("proc/modules",
          "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
          "vfio_pci 16384 0 - Live 0x0000000000000000\n");
  h.write("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n/swap.img file 2097148 0 -2\n");
  h.write("sys/class/iommu/ivhd0/.keep", "");
  FakeHost::Function port{"0000:40:01.1", "0x1022", "0x1483", "0x060400"};
  port.driver = "pcieport";
  port.config = FakeHost::config_with_acs(0x005f);
  port.max_speed = "16.0 GT/s PCIe";
  h.add_pci(port);
  FakeHost::Function gpu{"0000:41:00.0"};
  gpu.driver = "vfio-pci";
  gpu.numa_node = 1;
  h.add_pci(gpu, {"0000:40:01.1"});
  h.iommu_group(12, "DMA", {"0000:41:00.0"});

  TuningFacts f = read_tuning_facts(h.root_string());
  EXPECT_TRUE(f.problems.empty()) << f.problems.front().path;
  EXPECT_TRUE(f.kernel_cmdline_known);
  EXPECT_EQ(f.kernel_release, "6.1.0-18-amd64");
  EXPECT_EQ(f.cpu_vendor, "AuthenticAMD");
  EXPECT_EQ(f.numa_balancing, 1);
  EXPECT_THAT(f.governors, ElementsAre(Pair(0u, "powersave"), Pair(1u, "performance")));
  EXPECT_EQ(f.isolated->to_list(), "2-3");
  EXPECT_EQ(f.nohz_full->to_list(), "4-7");
  EXPECT_EQ(f.systemd_cpu_affinity->to_list(), "0-1");  // the drop-ins reset and set it
  EXPECT_TRUE(f.module_loaded("nvidia-peermem"));
  EXPECT_TRUE(f.module_loaded("vfio_pci"));
  EXPECT_FALSE(f.module_loaded("nvidia"));
  EXPECT_EQ(f.modprobe_options.at("vfio_pci"), std::vector<std::string>{"ids=10de:2330"});
  EXPECT_EQ(f.swap_total_bytes, 2097148ull * 1024);
  EXPECT_EQ(f.swap_devices, std::vector<std::string>{"/swap.img"});
  EXPECT_TRUE(f.iommu_present);
  ASSERT_EQ(f.iommu_groups.count(12), 1u);
  EXPECT_EQ(f.iommu_groups.at(12).type, "DMA");

  const PciFunctionFacts* g = f.pci_function(*PciAddress::parse("0000:41:00.0"));
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->vendor_id, 0x10de);
  EXPECT_EQ(g->class_code, 0x030200u);
  EXPECT_EQ(g->numa_node, 1);
  EXPECT_EQ(g->driver, "vfio-pci");
  EXPECT_EQ(g->driver_override, "");
  EXPECT_EQ(g->iommu_group, 12u);
  EXPECT_THAT(g->upstream_bridges, ElementsAre(*PciAddress::parse("0000:40:01.1")));
  EXPECT_EQ(g->port_max_speed_gts, 16.0);
  const PciFunctionFacts* p = f.pci_function(*PciAddress::parse("0000:40:01.1"));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->is_bridge());
  EXPECT_TRUE(p->acs_readable);
  EXPECT_EQ(p->acs_control, 0x005f);
}

// A number wider than the field it is kept in is no reading (a problem where the file must be
// there), never wrapped: each of these read as a valid value before (1, CPU 0, 0x10de, node 1,
// group 12, 2^64-1 KiB of swap).
TEST(TuningFacts, NumbersPastTheirFieldAreNeverWrapped) {
  FakeHost h;
  h.write("proc/cmdline", "ro\n");
  h.write("proc/sys/kernel/numa_balancing", "4294967297\n");
  h.write("sys/devices/system/cpu/cpu4294967296/cpufreq/scaling_governor", "powersave\n");
  h.write("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n/swap.img file -1 0 -2\n");
  FakeHost::Function gpu{"0000:41:00.0", "0x110de", "0x12330"};
  h.add_pci(gpu);
  h.write("sys/bus/pci/devices/0000:41:00.0/numa_node", "4294967297\n");
  h.iommu_group(12, "DMA", {});
  h.write("sys/kernel/iommu_groups/4294967308/type", "identity\n");

  TuningFacts f = read_tuning_facts(h.root_string());
  EXPECT_EQ(f.numa_balancing, std::nullopt);
  EXPECT_TRUE(f.governors.empty());
  EXPECT_EQ(f.swap_total_bytes, 0u);
  EXPECT_TRUE(f.swap_devices.empty());
  ASSERT_EQ(f.iommu_groups.size(), 1u);
  EXPECT_EQ(f.iommu_groups.at(12).type, "DMA");
  const PciFunctionFacts* g = f.pci_function(*PciAddress::parse("0000:41:00.0"));
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->vendor_id, 0);
  EXPECT_EQ(g->device_id, 0);
  EXPECT_EQ(g->numa_node, std::nullopt);
  std::vector<std::string> problems;
  for (const auto& p : f.problems)
    problems.push_back(p.path + ": " + p.problem);
  EXPECT_THAT(problems,
              ::testing::UnorderedElementsAre(
                  "proc/sys/kernel/numa_balancing: '4294967297' is out of range "
                  "(-2147483648..2147483647)",
                  "sys/bus/pci/devices/0000:41:00.0/numa_node: '4294967297' is out of range "
                  "(-1..4095)"));
}

// The link files as the kernel writes them, and what it never writes: a value we cannot trust
// is 0 (unknown), never nan, negative or past any PCIe generation; an absent file is nullopt.
TEST(PciLinkFiles, SpeedAndWidthAsTheKernelWritesThemAndNothingElse) {
  TempDir dir;
  auto speed = [&](const std::string& text) {
    std::ofstream(dir.path() / "max_link_speed", std::ios::trunc) << text;
    return detail::read_link_speed(dir.path() / "max_link_speed");
  };
  auto width = [&](const std::string& text) {
    std::ofstream(dir.path() / "max_link_width", std::ios::trunc) << text;
    return detail::read_link_width(dir.path() / "max_link_width");
  };
  EXPECT_EQ(speed("16.0 GT/s PCIe\n"), 16.0);
  EXPECT_EQ(speed("2.5 GT/s\n"), 2.5);
  EXPECT_EQ(speed("64.0 GT/s PCIe\n"), 64.0);
  EXPECT_EQ(speed("Unknown\n"), 0.0);
  for (const char* bad : {"nan GT/s", "inf GT/s", "-16.0 GT/s", "1e308 GT/s", "512 GT/s", "",
                          "0x10 GT/s", "16.0GT/s"})
    EXPECT_EQ(speed(bad), 0.0) << bad;
  EXPECT_EQ(width("16\n"), 16u);
  EXPECT_EQ(width("0\n"), 0u);  // link down
  for (const char* bad : {"33", "4294967312", "-1", "0x10", "16 lanes"})
    EXPECT_EQ(width(bad), 0u) << bad;
  EXPECT_EQ(detail::read_link_speed(dir.path() / "absent"), std::nullopt);
  EXPECT_EQ(detail::read_link_width(dir.path() / "absent"), std::nullopt);
}

TEST(TuningFacts, AnEmptyRootIsAnXmlCaptureWithNoFacts) {
  TuningFacts f = read_tuning_facts("");
  EXPECT_FALSE(f.kernel_cmdline_known);
  EXPECT_TRUE(f.problems.empty());
  EXPECT_TRUE(f.pci.empty());
}

TEST(TuningFacts, TheGatheredNecVectorEngineTree) {
  TempDir dir;
  auto root = polyaccel::testing::extract_tarball(
      topology_fixture("sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
      dir.path());
  TuningFacts f = read_tuning_facts(root.string());
  EXPECT_TRUE(f.kernel_cmdline_known);
  EXPECT_EQ(f.kernel_arg("crashkernel"), "auto");
  EXPECT_EQ(f.kernel_release, "3.10.0-1160.15.2.el7.x86_64");  // from proc/version
  EXPECT_EQ(f.cpu_vendor, "GenuineIntel");
  EXPECT_EQ(f.pci.size(), 28u);
  EXPECT_TRUE(f.isolated && f.isolated->empty());
  EXPECT_TRUE(f.nohz_full && f.nohz_full->empty());  // the kernel wrote "\0\n"
  EXPECT_EQ(f.swap_total_bytes, 8388604ull * 1024);  // proc/meminfo: no proc/swaps gathered
  const auto* ve = f.pci_function(*PciAddress::parse("0000:1b:00.0"));
  ASSERT_NE(ve, nullptr);
  EXPECT_EQ(ve->driver, "ve_drv");
  EXPECT_EQ(ve->numa_node, 0);
  EXPECT_EQ(ve->vendor_id, 0x1bcf);
  // Root port, the PLX switch's upstream port, its downstream port.
  ASSERT_EQ(ve->upstream_bridges.size(), 3u);
  EXPECT_EQ(ve->upstream_bridges[0].to_string(), "0000:17:00.0");
  EXPECT_EQ(ve->upstream_bridges[1].to_string(), "0000:18:00.0");
  EXPECT_EQ(ve->port_max_speed_gts, 8.0);
  EXPECT_EQ(ve->port_max_width, 16u);
  const auto* bridge = f.pci_function(ve->upstream_bridges[2]);
  ASSERT_NE(bridge, nullptr);
  EXPECT_EQ(bridge->driver, "pcieport");
  EXPECT_FALSE(bridge->acs_readable);  // gathered as a user: 64 bytes of config space
  EXPECT_FALSE(f.iommu_present);
}

TEST(TuningFacts, ThePower9Tree) {
  TempDir dir;
  auto root = polyaccel::testing::extract_tarball(
      topology_fixture("sysfs_power9-2socket-6xV100-gpumem-numa.tar.bz2"), dir.path());
  TuningFacts f = read_tuning_facts(root.string());
  EXPECT_TRUE(f.kernel_cmdline_known);
  EXPECT_EQ(f.kernel_arg("rd.lvm.lv"), "system/root");
  EXPECT_EQ(f.kernel_release, "4.14.0-49.el7a.bz1553205.page_fault_hang.ppc64le");
  EXPECT_EQ(f.cpu_vendor, "");  // POWER9's cpuinfo has no vendor_id
  // Six GPU functions gathered as plain directories with only their class: what is not there
  // stays unknown.
  ASSERT_EQ(f.pci.size(), 6u);
  for (const auto& [address, p] : f.pci) {
    EXPECT_EQ(p.class_code, 0x030000u) << address.to_string();
    EXPECT_FALSE(p.numa_node);
    EXPECT_TRUE(p.upstream_bridges.empty());
  }
  EXPECT_TRUE(f.governors.empty());
}

}  // namespace
}  // namespace polyaccel
