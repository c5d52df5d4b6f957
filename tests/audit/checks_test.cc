// Each check on a host the test builds: the finding appears, and disappears once the tree is
// fixed. Models come from the real captured machines (../shared/fixtures/topologies); the facts
// from sysfs/procfs/etc files written in the kernel's formats (fake_host.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "audit/audit.h"
#include "audit/audit_test_support.h"
#include "audit/fake_host.h"
#include "discover/discover.h"

namespace polyaccel {
namespace {

using polyaccel::testing::FakeHost;
using polyaccel::testing::fixture_model;
using polyaccel::testing::topology_fixture;
using ::testing::HasSubstr;

using polyaccel::testing::kXe8640;
const std::string kJureca = "2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml";

using polyaccel::testing::with_id;
using polyaccel::testing::xe8640;

std::vector<Finding> audit(const HostModel& m, const FakeHost& host, AuditIntent intent = {},
                           std::vector<std::string> only = {}) {
  TuningFacts facts = read_tuning_facts(host.root_string());
  std::vector<AcceleratorSample> none;
  return run_audit({m, facts, none, intent}, only);
}

// A host that has booted: command line, kernel release, CPU vendor.
void boot(const FakeHost& h, const std::string& cmdline = "BOOT_IMAGE=/vmlinuz ro quiet") {
  h.write("proc/cmdline", cmdline + "\n");
  h.write("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
  h.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\n");
}

AuditIntent hypervisor() {
  AuditIntent i;
  i.role = HostRole::hypervisor;
  return i;
}

TEST(AuditChecks, NumaBalancingWhereCpusArePinned) {
  FakeHost h;
  boot(h, "ro isolcpus=managed_irq,domain,2-55");
  h.write("proc/sys/kernel/numa_balancing", "1\n");
  auto f = with_id(audit(xe8640(), h), "numa.balancing");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::warning);
  EXPECT_EQ(f[0].observed, "kernel.numa_balancing = 1");
  EXPECT_EQ(f[0].remedy.sysctls, std::vector<std::string>{"kernel.numa_balancing = 0"});
  ASSERT_EQ(f[0].remedy.runtime.size(), 1u);
  EXPECT_EQ(f[0].remedy.runtime[0].path, "proc/sys/kernel/numa_balancing");
  EXPECT_TRUE(f[0].remedy.runtime_is_complete());

  h.write("proc/sys/kernel/numa_balancing", "0\n");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "numa.balancing").empty());
  // Nothing pinned on a compute host: balancing is the kernel's business.
  h.write("proc/sys/kernel/numa_balancing", "1\n");
  boot(h, "ro quiet");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "numa.balancing").empty());
}

TEST(AuditChecks, MalformedOrUnreadableFilesAreTheAuditsLimitsNotFindings) {
  FakeHost h;
  boot(h, "ro isolcpus=2-55");
  h.write("proc/sys/kernel/numa_balancing", "enabled\n");
  h.write("sys/devices/system/cpu/nohz_full", "2-x\n");
  auto all = audit(xe8640(), h);
  EXPECT_TRUE(with_id(all, "numa.balancing").empty());
  auto limits = with_id(all, "audit.limits");
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].severity, Severity::info);
  EXPECT_EQ(limits[0].subject, "proc/sys/kernel/numa_balancing");
  EXPECT_THAT(limits[0].observed, HasSubstr("'enabled' is not a whole number"));
  EXPECT_EQ(limits[1].subject, "sys/devices/system/cpu/nohz_full");

  // A file the kernel shows but that cannot be read (here a directory in its place).
  h.remove("proc/sys/kernel/numa_balancing");
  h.write("proc/sys/kernel/numa_balancing/x", "");
  limits = with_id(audit(xe8640(), h), "audit.limits");
  ASSERT_FALSE(limits.empty());
  EXPECT_EQ(limits[0].observed, "cannot be read");
}

TEST(AuditChecks, PciLocalityUnknownFromNumaNodeMinusOne) {
  FakeHost h;
  boot(h);
  const auto& gpu0 = xe8640().accelerators[0];
  FakeHost::Function f{gpu0.pci.address.to_string()};
  f.numa_node = -1;
  std::string dir = h.add_pci(f);
  auto found = with_id(audit(xe8640(), h), "numa.pci-locality-unknown");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].subject, "0000:4e:00.0 (gpu0)");
  EXPECT_EQ(found[0].observed, "numa_node is -1");
  ASSERT_EQ(found[0].remedy.commands.size(), 1u);
  EXPECT_THAT(found[0].remedy.commands[0], HasSubstr("echo 3 > /sys/bus/pci/devices/0000:4e:00.0"));

  h.write(dir + "/numa_node", "3\n");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "numa.pci-locality-unknown").empty());
}

TEST(AuditChecks, PciLocalityFromTheRealTopologies) {
  FakeHost none;  // no facts: the topology alone
  for (const auto& fixture : {kXe8640, kJureca}) {
    HostModel m = fixture_model(fixture);
    EXPECT_TRUE(with_id(audit(m, none), "numa.pci-locality-unknown").empty()) << fixture;
    // A NIC whose locality the firmware did not give.
    m.nics[0].pci.numa_nodes.clear();
    auto f = with_id(audit(m, none), "numa.pci-locality-unknown");
    ASSERT_EQ(f.size(), 1u) << fixture;
    EXPECT_EQ(f[0].subject, m.nics[0].pci.address.to_string() + " (nic0)");
  }
  // One NUMA node: nothing can be misplaced.
  HostModel single = fixture_model(kJureca);
  single.numa_nodes.resize(1);
  single.nics[0].pci.numa_nodes.clear();
  EXPECT_TRUE(with_id(audit(single, none), "numa.pci-locality-unknown").empty());
}

TEST(AuditChecks, GovernorOnCpusThatServeAccelerators) {
  FakeHost h;
  boot(h);
  unsigned near = *xe8640().accelerators[0].pci.local_cpus.first();
  CpuSet all_gpu_cpus;
  for (const auto& a : xe8640().accelerators)
    all_gpu_cpus |= a.pci.local_cpus;
  unsigned far = *(xe8640().pus - all_gpu_cpus).first();  // a CPU of a node without GPU
  auto gov = [&](unsigned cpu, const std::string& g) {
    h.write("sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/scaling_governor",
            g + "\n");
  };
  gov(near, "powersave");
  gov(near + 1, "schedutil");
  gov(far, "powersave");
  auto f = with_id(audit(xe8640(), h), "cpu.governor");
  ASSERT_EQ(f.size(), 2u);  // one per governor, the far CPU left alone
  EXPECT_EQ(f[0].observed, "scaling_governor powersave");
  EXPECT_EQ(f[0].subject, "cpu " + std::to_string(near));
  ASSERT_EQ(f[0].remedy.runtime.size(), 1u);
  EXPECT_EQ(f[0].remedy.runtime[0].path,
            "sys/devices/system/cpu/cpu" + std::to_string(near) + "/cpufreq/scaling_governor");
  EXPECT_EQ(f[0].remedy.runtime[0].value, "performance");
  EXPECT_EQ(f[1].observed, "scaling_governor schedutil");

  gov(near, "performance");
  gov(near + 1, "performance");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "cpu.governor").empty());
}

TEST(AuditChecks, IsolationOfPinnedCpus) {
  FakeHost h;
  boot(h);
  AuditIntent intent;
  intent.pinned_cpus = CpuSet::parse_list("2-27");
  auto f = with_id(audit(xe8640(), h, intent), "cpu.isolation");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::warning);
  EXPECT_EQ(f[0].subject, "cpus 2-27");
  EXPECT_THAT(f[0].observed, HasSubstr("host services may run on 2-27"));
  EXPECT_THAT(f[0].remedy.kernel_args, ::testing::ElementsAre("nohz_full=2-27", "rcu_nocbs=2-27"));
  EXPECT_EQ(f[0].remedy.systemd, std::vector<std::string>{"CPUAffinity=0-1 28-223"});

  // systemd keeps the host off them; ticks and RCU still there: information only.
  h.write("etc/systemd/system.conf", "[Manager]\n#CPUAffinity=1 2\n");
  h.write("etc/systemd/system.conf.d/cpus.conf", "[Manager]\nCPUAffinity=0 1 28-223\n");
  f = with_id(audit(xe8640(), h, intent), "cpu.isolation");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::info);

  boot(h, "ro nohz_full=2-27 rcu_nocbs=2-27");
  EXPECT_TRUE(with_id(audit(xe8640(), h, intent), "cpu.isolation").empty());
  // isolcpus alone covers the scheduler side as well.
  h.remove("etc/systemd");
  boot(h, "ro isolcpus=domain,managed_irq,2-27 nohz_full=2-27 rcu_nocbs=2-27");
  EXPECT_TRUE(with_id(audit(xe8640(), h, intent), "cpu.isolation").empty());
}

TEST(AuditChecks, AHypervisorWithNothingSetApart) {
  FakeHost h;
  boot(h);
  auto f = with_id(audit(xe8640(), h, hypervisor()), "cpu.isolation");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "host");
  ASSERT_EQ(f[0].remedy.systemd.size(), 1u);
  // One core (both threads) per NUMA node stays with the host.
  EXPECT_EQ(f[0].remedy.systemd[0].rfind("CPUAffinity=", 0), 0u);
  EXPECT_TRUE(with_id(audit(xe8640(), h), "cpu.isolation").empty());  // compute: no opinion
}

TEST(AuditChecks, IommuOffWherePassthroughIsMeant) {
  FakeHost h;
  boot(h, "ro vfio-pci.ids=10de:2330");
  auto f = with_id(audit(xe8640(), h), "iommu.enabled");  // vfio-pci.ids: a hypervisor
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::critical);
  EXPECT_THAT(f[0].remedy.kernel_args, ::testing::Contains("intel_iommu=on"));

  h.write("sys/class/iommu/dmar0/.keep", "");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "iommu.enabled").empty());
  // No passthrough intended: an IOMMU that is off is not a finding.
  FakeHost plain;
  boot(plain);
  EXPECT_TRUE(with_id(audit(xe8640(), plain), "iommu.enabled").empty());
}

TEST(AuditChecks, IommuTranslatingForHostDevices) {
  FakeHost h;
  boot(h, "ro intel_iommu=on");
  h.write("sys/class/iommu/dmar0/.keep", "");
  h.add_pci({"0000:4e:00.0"});
  h.iommu_group(17, "DMA-FQ", {"0000:4e:00.0"});
  auto f = with_id(audit(xe8640(), h), "iommu.passthrough");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::warning);
  EXPECT_THAT(f[0].observed, HasSubstr("0000:4e:00.0 (gpu0) (group 17, DMA-FQ)"));
  EXPECT_EQ(f[0].remedy.kernel_args, std::vector<std::string>{"iommu=pt"});

  h.write("sys/kernel/iommu_groups/17/type", "identity\n");
  boot(h, "ro intel_iommu=on iommu=pt");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "iommu.passthrough").empty());
}

// gpu0 (4e:00.0) and its closest NIC (4d:00.0) under one Gen5 switch (upstream port 49:00.0
// below root port 48:01.0), each on a downstream port.
void xe8640_switch(const FakeHost& h, std::uint16_t gpu_port_acs, std::uint16_t nic_port_acs) {
  FakeHost::Function root{"0000:48:01.0", "0x8086", "0x352a", "0x060400"};
  root.driver = "pcieport";
  h.add_pci(root);
  FakeHost::Function up{"0000:49:00.0", "0x1000", "0xc030", "0x060400"};
  up.driver = "pcieport";
  up.config = FakeHost::config_with_acs(0);
  h.add_pci(up, {"0000:48:01.0"});
  FakeHost::Function gpu_port{"0000:4a:01.0", "0x1000", "0xc030", "0x060400"};
  gpu_port.config = FakeHost::config_with_acs(gpu_port_acs);
  h.add_pci(gpu_port, {"0000:48:01.0", "0000:49:00.0"});
  FakeHost::Function nic_port{"0000:4a:00.0", "0x1000", "0xc030", "0x060400"};
  nic_port.config = FakeHost::config_with_acs(nic_port_acs);
  h.add_pci(nic_port, {"0000:48:01.0", "0000:49:00.0"});
  h.add_pci({"0000:4e:00.0"}, {"0000:48:01.0", "0000:49:00.0", "0000:4a:01.0"});
  for (const char* nic : {"0000:4d:00.0", "0000:4d:00.1"}) {
    FakeHost::Function f{nic, "0x15b3", "0x101b", "0x020700"};
    f.driver = "mlx5_core";
    h.add_pci(f, {"0000:48:01.0", "0000:49:00.0", "0000:4a:00.0"});
  }
}

TEST(AuditChecks, AcsRedirectOnTheSwitchBetweenGpuAndNic) {
  FakeHost h;
  boot(h);
  // SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+ on the GPU's port, as the kernel sets it
  // when the IOMMU is on.
  xe8640_switch(h, 0x001d, 0x0000);
  auto f = with_id(audit(xe8640(), h), "pcie.acs-redirect");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::critical);
  EXPECT_EQ(f[0].subject, "0000:4a:01.0");
  EXPECT_THAT(f[0].observed, HasSubstr("ReqRedir+ CmpltRedir+"));
  EXPECT_THAT(f[0].observed, HasSubstr("0000:4e:00.0 (gpu0)"));
  EXPECT_EQ(f[0].remedy.commands,
            std::vector<std::string>{"setpci -s 0000:4a:01.0 ECAP_ACS+0x6.w=0011"});
  EXPECT_EQ(f[0].remedy.kernel_args,
            std::vector<std::string>{"pci=disable_acs_redir=0000:4a:01.0"});

  FakeHost fixed;
  boot(fixed);
  xe8640_switch(fixed, 0x0011, 0x0000);  // redirect bits cleared, the others kept
  EXPECT_TRUE(with_id(audit(xe8640(), fixed), "pcie.acs-redirect").empty());
}

TEST(AuditChecks, AcsUnreadableWithoutRootIsALimit) {
  FakeHost h;
  boot(h);
  xe8640_switch(h, 0x001d, 0x001d);
  // As a user sees it: 256 bytes of config space, no extended capabilities.
  h.write(h.device_dir("0000:4a:01.0") + "/config", std::string(256, '\0'));
  h.write(h.device_dir("0000:4a:00.0") + "/config", std::string(256, '\0'));
  auto all = audit(xe8640(), h);
  EXPECT_TRUE(with_id(all, "pcie.acs-redirect").empty());
  auto limits = with_id(all, "audit.limits");
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].subject, "pcie.acs-redirect");
  EXPECT_THAT(limits[0].observed, HasSubstr("2 bridges"));
}

TEST(AuditChecks, GpuDirectPeerMemoryAcceptsEitherRoute) {
  FakeHost h;
  boot(h);
  h.write("proc/modules",
          "nvidia_uvm 1531904 0 - Live 0x0000000000000000 (POE)\n"
          "nvidia 56807424 1 nvidia_uvm, Live 0x0000000000000000 (POE)\n"
          "mlx5_ib 475136 0 - Live 0x0000000000000000\n");
  h.write("proc/driver/nvidia/version",
          "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC "
          "2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n");
  auto f = with_id(audit(xe8640(), h), "gpudirect.peer-memory");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].observed, HasSubstr("proprietary"));
  EXPECT_EQ(f[0].remedy.modules_load, std::vector<std::string>{"nvidia_peermem"});

  // Route 1: the peer-memory module.
  h.write("sys/module/nvidia_peermem/refcnt", "0\n");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "gpudirect.peer-memory").empty());
  // Route 2: DMA-BUF with the open kernel modules on 5.12+.
  h.remove("sys/module/nvidia_peermem");
  h.write("proc/driver/nvidia/version",
          "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  "
          "(dvs-builder@U16-I3-B03-4-3)  Fri May 31 09:30:47 UTC 2024\n");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "gpudirect.peer-memory").empty());
  h.write("proc/sys/kernel/osrelease", "5.4.0-150-generic\n");
  f = with_id(audit(xe8640(), h), "gpudirect.peer-memory");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].observed, HasSubstr("kernel 5.4.0-150-generic"));
}

TEST(AuditChecks, GpuDirectNicDistanceOnTheRealTopologies) {
  FakeHost none;
  // XE8640: cb:00.0 has no NIC on its switch; the others share one with an HCA.
  auto f = with_id(audit(xe8640(), none), "gpudirect.nic-distance");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "0000:cb:00.0 (gpu2)");
  EXPECT_EQ(f[0].severity, Severity::warning);
  EXPECT_THAT(f[0].observed, HasSubstr("at SYS"));
  // JURECA-DC: one GPU and one HCA per switch, the textbook layout.
  EXPECT_TRUE(with_id(audit(fixture_model(kJureca), none), "gpudirect.nic-distance").empty());
  // g4dn.metal: no GPU shares a switch with the EFA.
  auto g4 =
      with_id(audit(fixture_model("2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml"), none),
              "gpudirect.nic-distance");
  EXPECT_EQ(g4.size(), 8u);
  // MI300A: the NIC shares the APU's host bridge, the best this design offers: information.
  auto apu =
      with_id(audit(fixture_model("4apu-4numa-4xMI300A-spx-4xslingshot_hpe-ex255a.xml"), none),
              "gpudirect.nic-distance");
  ASSERT_EQ(apu.size(), 4u);
  EXPECT_EQ(apu[0].severity, Severity::info);
  EXPECT_THAT(apu[0].observed, HasSubstr("at PHB"));
}

// vfio-pci.ids of more than 16 bits name no device: 110de:2330 read as 10de:2330 before (its
// wrapped value). Extra fields (subvendor...) still name the device.
TEST(AuditChecks, VfioIdsWiderThanSixteenBitsNameNoDevice) {
  for (const auto& [ids, flagged] : std::vector<std::pair<std::string, bool>>{
           {"110de:2330", false}, {"10de:12330", false}, {"10de:2330:ffffffff:ffffffff", true}}) {
    SCOPED_TRACE(ids);
    FakeHost h;
    boot(h, "ro intel_iommu=on iommu=pt vfio-pci.ids=" + ids);
    h.write("sys/class/iommu/dmar0/.keep", "");
    FakeHost::Function gpu{"0000:4e:00.0"};
    gpu.driver = "nvidia";
    h.add_pci(gpu);
    h.iommu_group(30, "DMA", {"0000:4e:00.0"});
    bool bound_to_nvidia = false;
    for (const auto& f : with_id(audit(xe8640(), h), "vfio.binding"))
      bound_to_nvidia = bound_to_nvidia || f.observed == "bound to nvidia";
    EXPECT_EQ(bound_to_nvidia, flagged);
  }
}

TEST(AuditChecks, VfioBindingAndSharedIommuGroups) {
  FakeHost h;
  boot(h, "ro intel_iommu=on iommu=pt vfio-pci.ids=10de:2330");
  h.write("sys/class/iommu/dmar0/.keep", "");
  FakeHost::Function gpu{"0000:4e:00.0"};
  gpu.driver = "nvidia";
  h.add_pci(gpu);
  FakeHost::Function nic{"0000:4d:00.0", "0x15b3", "0x101b", "0x020700"};
  nic.driver = "mlx5_core";
  h.add_pci(nic);
  h.iommu_group(30, "DMA", {"0000:4e:00.0", "0000:4d:00.0"});
  auto f = with_id(audit(xe8640(), h), "vfio.binding");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].subject, "0000:4e:00.0 (gpu0)");
  EXPECT_EQ(f[0].observed, "bound to nvidia");
  EXPECT_THAT(f[0].remedy.modprobe, ::testing::Contains("options vfio-pci ids=10de:2330"));
  EXPECT_THAT(f[0].remedy.modprobe, ::testing::Contains("softdep nvidia pre: vfio-pci"));
  EXPECT_EQ(f[1].observed, "IOMMU group 30 also holds 0000:4d:00.0 (mlx5_core)");

  h.bind("0000:4e:00.0", "vfio-pci");
  h.remove("sys/kernel/iommu_groups");
  h.iommu_group(30, "DMA", {"0000:4e:00.0"});
  h.iommu_group(31, "identity", {"0000:4d:00.0"});
  EXPECT_TRUE(with_id(audit(xe8640(), h), "vfio.binding").empty());
}

TEST(AuditChecks, SwapOnAHypervisor) {
  FakeHost h;
  boot(h);
  h.write("proc/swaps",
          "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
          "/dev/dm-1                               partition\t8388604\t\t0\t\t-2\n");
  auto f = with_id(audit(xe8640(), h, hypervisor()), "memory.swap");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].observed, "8.0 GiB of swap active (/dev/dm-1)");
  EXPECT_TRUE(with_id(audit(xe8640(), h), "memory.swap").empty());  // compute host: fine

  h.write("proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
  EXPECT_TRUE(with_id(audit(xe8640(), h, hypervisor()), "memory.swap").empty());
}

TEST(AuditChecks, HugepagesOnSomeNodesAndNotOthers) {
  HostModel m = xe8640();
  for (auto& n : m.numa_nodes)
    n.hugepages = {{2ull << 20, 512, 512}, {1ull << 30, 0, 0}};
  m.numa_nodes[5].hugepages[0].total = 0;
  FakeHost h;
  boot(h);
  auto f = with_id(audit(m, h, hypervisor()), "hugepages.reserved");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "node5");
  ASSERT_EQ(f[0].remedy.runtime.size(), 1u);
  EXPECT_EQ(f[0].remedy.runtime[0].path,
            "sys/devices/system/node/node5/hugepages/hugepages-2048kB/nr_hugepages");
  EXPECT_EQ(f[0].remedy.runtime[0].value, "512");

  m.numa_nodes[5].hugepages[0].total = 512;
  EXPECT_TRUE(with_id(audit(m, h, hypervisor()), "hugepages.reserved").empty());
  // None anywhere on a hypervisor.
  for (auto& n : m.numa_nodes)
    n.hugepages[0].total = 0;
  f = with_id(audit(m, h, hypervisor()), "hugepages.reserved");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "host");
  // Asked for an amount: every node short of it.
  AuditIntent want = hypervisor();
  want.hugepages_per_node_bytes = 1ull << 30;
  f = with_id(audit(m, h, want), "hugepages.reserved");
  EXPECT_EQ(f.size(), m.numa_nodes.size());
  EXPECT_EQ(f[0].remedy.runtime[0].value, "512");
}

TEST(AuditChecks, OneGigPagesBelongOnTheKernelCommandLine) {
  HostModel m = xe8640();
  for (auto& n : m.numa_nodes)
    n.hugepages = {{2ull << 20, 0, 0}, {1ull << 30, 4, 4}};
  FakeHost h;
  boot(h);
  auto f = with_id(audit(m, h), "hugepages.1g-runtime");
  ASSERT_EQ(f.size(), 1u);
  // Kernel 6.1 takes the per-node list.
  EXPECT_THAT(f[0].remedy.kernel_args,
              ::testing::ElementsAre("hugepagesz=1G", "hugepages=0:4,1:4,2:4,3:4,4:4,5:4,6:4,7:4"));
  boot(h, "ro default_hugepagesz=1G hugepagesz=1G hugepages=32");
  EXPECT_TRUE(with_id(audit(m, h), "hugepages.1g-runtime").empty());
}

// libvirt: "Unable to find any usable hugetlbfs mount for 1048576 KiB" unless each reserved
// page size has its hugetlbfs mount.
TEST(AuditChecks, EachReservedPageSizeNeedsAHugetlbfsMount) {
  HostModel m = xe8640();
  for (auto& n : m.numa_nodes)
    n.hugepages = {{2ull << 20, 16, 16}, {1ull << 30, 4, 4}};
  FakeHost h;
  boot(h);
  h.write("proc/meminfo", "MemTotal: 1000 kB\nHugepagesize:       2048 kB\n");
  h.write("proc/mounts", "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n");
  auto f = with_id(audit(m, h), "hugepages.mount");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "hugetlbfs 1 GiB");
  EXPECT_NE(f[0].remedy.commands[0].find("pagesize=1G"), std::string::npos);
  // A mount without pagesize= has the default size: then 2 MiB is covered, 1 GiB by its own.
  h.write("proc/mounts",
          "hugetlbfs /dev/hugepages hugetlbfs rw,relatime 0 0\n"
          "none /dev/hugepages1G hugetlbfs rw,relatime,pagesize=1024M 0 0\n");
  EXPECT_TRUE(with_id(audit(m, h), "hugepages.mount").empty());
}

// issue 32: on AMD the IOMMU is on by default and amd_iommu has no "on": iommu=pt only.
TEST(AuditChecks, AmdIommuRemedyIsIommuPtOnly) {
  FakeHost h;
  boot(h, "ro vfio-pci.ids=10de:2330");
  h.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\n");
  auto f = with_id(audit(xe8640(), h), "iommu.enabled");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].remedy.kernel_args, std::vector<std::string>{"iommu=pt"});
}

// issue 42: on the live host, root without CAP_SYS_ADMIN (the agent unprivileged, its
// least-privilege component) reads 64 bytes of a bridge's config space: the remedy names the
// capability, not root alone, which such an agent already is.
TEST(AuditChecks, AcsUnreadableOnTheLiveHostNamesTheCapability) {
  FakeHost h;
  boot(h);
  xe8640_switch(h, 0x001d, 0x001d);
  h.write(h.device_dir("0000:4a:01.0") + "/config", std::string(64, '\0'));
  h.write(h.device_dir("0000:4a:00.0") + "/config", std::string(64, '\0'));
  TuningFacts facts = read_tuning_facts(h.root_string());
  facts.root = "/";  // as read on the live host
  std::vector<AcceleratorSample> none;
  auto limits = with_id(run_audit({xe8640(), facts, none, {}}, {}), "audit.limits");
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_THAT(limits[0].observed, HasSubstr("2 bridges"));
  EXPECT_THAT(limits[0].observed, HasSubstr("no extended config space"));
  EXPECT_THAT(limits[0].remedy.summary, HasSubstr("as root with CAP_SYS_ADMIN"));
  EXPECT_THAT(limits[0].remedy.summary, HasSubstr("least-privilege"));
}

// issue 32: a capture's 256-byte config files say so, and how to gather the 4096 bytes.
TEST(AuditChecks, AcsUnreadableInACaptureSaysHowToGatherIt) {
  FakeHost h;
  boot(h);
  xe8640_switch(h, 0x001d, 0x001d);
  h.write(h.device_dir("0000:4a:01.0") + "/config", std::string(256, '\0'));
  h.write(h.device_dir("0000:4a:00.0") + "/config", std::string(256, '\0'));
  auto limits = with_id(audit(xe8640(), h), "audit.limits");
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_THAT(limits[0].remedy.summary, HasSubstr("this capture holds 256 of the 4096"));
  EXPECT_THAT(limits[0].remedy.summary, HasSubstr("as root"));
  EXPECT_THAT(limits[0].remedy.summary, ::testing::Not(HasSubstr("run the audit as root")));
}

// issue 32: which checks could not run for lack of a fact, so that half a capture never reads
// as a clean host; a full tree runs them.
TEST(AuditChecks, CoverageNamesTheChecksThatLackAFact) {
  FakeHost h;  // nothing at all under the root
  TuningFacts empty = read_tuning_facts(h.root_string());
  std::vector<AcceleratorSample> none;
  AuditCoverage c = audit_coverage({xe8640(), empty, none, {}});
  EXPECT_EQ(c.checks, all_finding_ids().size() - 1);  // audit.limits is no check of the host
  auto unchecked = [](const AuditCoverage& cov, const std::string& id) {
    for (const auto& u : cov.unchecked)
      if (u.id == id) return u.missing_fact;
    return std::string();
  };
  EXPECT_EQ(unchecked(c, "numa.balancing"), "proc/sys/kernel/numa_balancing");
  EXPECT_EQ(unchecked(c, "gpudirect.peer-memory"), "proc/modules");
  EXPECT_EQ(unchecked(c, "iommu.enabled"), "proc/cmdline and sys/class/iommu");
  EXPECT_EQ(unchecked(c, "gpudirect.nic-distance"), "");  // the model is enough
  EXPECT_GT(c.unchecked.size(), c.ran());

  boot(h);
  h.write("proc/sys/kernel/numa_balancing", "0\n");
  h.write("proc/modules", "nvidia 1 0 - Live 0x0\n");
  h.write("sys/class/iommu/dmar0/.keep", "");
  TuningFacts some = read_tuning_facts(h.root_string());
  AuditCoverage more = audit_coverage({xe8640(), some, none, {}});
  EXPECT_EQ(unchecked(more, "numa.balancing"), "");
  EXPECT_EQ(unchecked(more, "gpudirect.peer-memory"), "");
  EXPECT_EQ(unchecked(more, "iommu.enabled"), "");
  EXPECT_LT(more.unchecked.size(), c.unchecked.size());
  // --only: the asked ids only.
  AuditCoverage only = audit_coverage({xe8640(), empty, none, {}}, {"numa.balancing"});
  EXPECT_EQ(only.checks, 1u);
  ASSERT_EQ(only.unchecked.size(), 1u);
  EXPECT_EQ(only.ran(), 0u);
}

TEST(AuditChecks, OnlyKeepsTheAskedIdsAndUnknownFactsStaySilent) {
  FakeHost h;  // nothing at all under the root
  auto all = audit(xe8640(), h, hypervisor());
  for (const auto& f : all) {
    EXPECT_TRUE(f.id == "gpudirect.nic-distance" || f.id == "hugepages.reserved" ||
                f.id == "audit.limits")
        << f.id << " " << f.observed;
  }
  // The exporter's entry point gives the same values.
  TuningFacts facts = read_tuning_facts(h.root_string());
  auto values = audit_host(xe8640(), facts, {}, hypervisor());
  ASSERT_EQ(values.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(values[i].id, all[i].id);
    EXPECT_EQ(values[i].subject, all[i].subject);
    EXPECT_EQ(values[i].observed, all[i].observed);
  }
  auto only = audit(xe8640(), h, hypervisor(), {"gpudirect.nic-distance"});
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].id, "gpudirect.nic-distance");
  // Every id a check gives is listed once.
  auto ids = all_finding_ids();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
}

}  // namespace
}  // namespace polyaccel
