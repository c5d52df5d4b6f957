// libvirt's running domains read as placements (place/libvirt_domains.h): domain XMLs built here
// in the shapes libvirt writes (Nova's pinned guests, unpinned ones, hugepages in two sizes,
// hostdevs, a shut-off status), hostile ones refused, and the fit avoiding what they hold on
// a real captured host.
#include <gtest/gtest.h>

#include <algorithm>

#include "place/allocation_store.h"
#include "place/host_view.h"
#include "place/libvirt_domains.h"
#include "place/place_test_support.h"
#include "support/test_support.h"

namespace polyaccel::place {
namespace {

using polyaccel::testing::TempDir;
using polyaccel::testing::write_text;
using testing::fixture;
using testing::kG4dn;
using testing::view_of;

// A domain as libvirt's status file holds it: <domstatus> around the live <domain>. `body` is
// what goes inside <domain> after <name> and <vcpu>.
std::string status_xml(const std::string& name, const std::string& vcpu, const std::string& body,
                       const std::string& state = "running") {
  return "<domstatus state='" + state + "' reason='booted' pid='4242'>\n" +
         "  <monitor path='/var/lib/libvirt/qemu/domain-1/monitor.sock' type='unix'/>\n" +
         "  <domain type='kvm' id='1'>\n    <name>" + name + "</name>\n" +
         "    <uuid>8e3a3b3c-3f1a-4d55-9d0e-6c3f0e7b9a11</uuid>\n" +
         "    <memory unit='KiB'>8388608</memory>\n" + "    " + vcpu + "\n" + body +
         "  </domain>\n</domstatus>\n";
}

// Nova's guest with hw:cpu_policy=dedicated, hw:numa_nodes=2, hw:emulator_threads_policy=isolate
// and a GPU: vCPUs 0-1 on host node 0's PUs 0 and 48, vCPUs 2-3 on node 1's 24 and 72, the
// emulator on PU 1 alone; cell 0 on 1 GiB pages, cell 1 on 2 MiB pages.
const std::string kNovaPinned = status_xml("instance-0000002a", "<vcpu placement='static'>4</vcpu>",
                                           R"(
    <memoryBacking>
      <hugepages>
        <page size='1048576' unit='KiB' nodeset='0'/>
        <page size='2' unit='M' nodeset='1'/>
      </hugepages>
    </memoryBacking>
    <cputune>
      <shares>4096</shares>
      <vcpupin vcpu='0' cpuset='0'/>
      <vcpupin vcpu='1' cpuset='48'/>
      <vcpupin vcpu='2' cpuset='24'/>
      <vcpupin vcpu='3' cpuset='72'/>
      <emulatorpin cpuset='1'/>
    </cputune>
    <numatune>
      <memory mode='strict' nodeset='0-1'/>
      <memnode cellid='0' mode='strict' nodeset='0'/>
      <memnode cellid='1' mode='strict' nodeset='1'/>
    </numatune>
    <cpu mode='host-passthrough' check='none'>
      <topology sockets='2' dies='1' cores='1' threads='2'/>
      <numa>
        <cell id='0' cpus='0-1' memory='4194304' unit='KiB' memAccess='shared'/>
        <cell id='1' cpus='2-3' memory='4' unit='GiB'/>
      </numa>
    </cpu>
    <devices>
      <emulator>/usr/bin/qemu-system-x86_64</emulator>
      <hostdev mode='subsystem' type='pci' managed='yes'>
        <driver name='vfio'/>
        <source>
          <address domain='0x0000' bus='0x18' slot='0x00' function='0x0'/>
        </source>
        <alias name='hostdev0'/>
        <address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/>
      </hostdev>
      <interface type='hostdev' managed='yes'>
        <source><address type='pci' domain='0x0000' bus='0xe7' slot='0x00' function='0x1'/></source>
      </interface>
      <hostdev mode='subsystem' type='usb'><source><vendor id='0x1234'/></source></hostdev>
    </devices>
)");

Placement parse(const std::string& xml) {
  auto d = domain_placement("domain.xml", xml);
  if (!d) throw std::runtime_error(d.error().message());
  return std::move(d->placement);
}

TEST(LibvirtDomains, NovaPinnedGuestWithTwoPageSizesAndHostdevs) {
  auto d = domain_placement("instance.xml", kNovaPinned);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_TRUE(d->status_xml);
  EXPECT_TRUE(d->running);
  const Placement& p = d->placement;
  EXPECT_EQ(p.name, "libvirt:instance-0000002a");
  EXPECT_EQ(p.owner, "libvirt");
  EXPECT_EQ(p.vcpus, 4u);
  EXPECT_EQ(p.memory_bytes, std::uint64_t{8} << 30);
  EXPECT_EQ(p.cpu_policy, CpuPolicy::dedicated);
  // The isolated emulator PU is the guest's alone, with its four pinned vCPUs.
  EXPECT_EQ(p.held_pus.to_list(), "0-1,24,48,72");
  EXPECT_EQ(p.emulator_pus.to_list(), "1");
  ASSERT_EQ(p.cells.size(), 2u);
  EXPECT_EQ(p.cells[0].host_numa_node, 0u);
  EXPECT_EQ(p.cells[0].memory_bytes, std::uint64_t{4} << 30);
  EXPECT_EQ(p.cells[0].page_size_bytes, std::uint64_t{1} << 30);
  EXPECT_EQ(p.cells[0].pinning, (std::vector<std::pair<unsigned, unsigned>>{{0, 0}, {1, 48}}));
  EXPECT_EQ(p.cells[1].host_numa_node, 1u);
  EXPECT_EQ(p.cells[1].memory_bytes, std::uint64_t{4} << 30);
  EXPECT_EQ(p.cells[1].page_size_bytes, std::uint64_t{2} << 20);
  EXPECT_EQ(p.cells[1].vcpus, (std::vector<unsigned>{2, 3}));
  EXPECT_TRUE(p.cells[1].shared_vcpus.empty());
  // The GPU and the SR-IOV port; the USB device is no PCI function.
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.devices[0].pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(p.devices[1].pci_bus_id, "0000:e7:00.1");
}

TEST(LibvirtDomains, UnpinnedGuestHoldsNoPuAndFloats) {
  Placement p = parse(status_xml("plain", "<vcpu placement='static'>2</vcpu>", ""));
  EXPECT_EQ(p.cpu_policy, CpuPolicy::shared);
  EXPECT_TRUE(p.held_pus.empty());
  EXPECT_TRUE(p.cells.empty()) << "no NUMA topology: counted host-wide";
  EXPECT_EQ(p.vcpus, 2u);
  EXPECT_EQ(p.memory_bytes, std::uint64_t{8} << 30);
}

TEST(LibvirtDomains, SharedVcpusOverASetAndMemoryBoundToOneNode) {
  // Nova's shared guest on a host with cpu_shared_set: <vcpu cpuset>, its memory on node 1, on
  // the host's default huge pages.
  Placement p = parse(status_xml("shared", "<vcpu placement='static' cpuset='2-5,^3'>2</vcpu>",
                                 "<memoryBacking><hugepages/></memoryBacking>"
                                 "<numatune><memory mode='strict' nodeset='1'/></numatune>"));
  EXPECT_TRUE(p.held_pus.empty());
  ASSERT_EQ(p.cells.size(), 1u);
  EXPECT_EQ(p.cells[0].host_numa_node, 1u);
  EXPECT_EQ(p.cells[0].shared_vcpus, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(p.cells[0].shared_pus.to_list(), "2,4-5") << "^3 takes PU 3 out";
  EXPECT_EQ(p.cells[0].page_size_bytes, std::uint64_t{2} << 20);
  EXPECT_EQ(p.cells[0].memory_bytes, std::uint64_t{8} << 30);
}

TEST(LibvirtDomains, MixedGuestHoldsOnlyItsPinnedPus) {
  Placement p =
      parse(status_xml("mixed", "<vcpu>3</vcpu>",
                       "<cputune><vcpupin vcpu='0' cpuset='7'/><vcpupin vcpu='1' cpuset='8-9'/>"
                       "<emulatorpin cpuset='8-9'/></cputune>"));
  EXPECT_EQ(p.cpu_policy, CpuPolicy::mixed);
  EXPECT_EQ(p.held_pus.to_list(), "7") << "vCPU 1 floats over 8-9, vCPU 2 anywhere";
}

TEST(LibvirtDomains, ShutOffStatusAndDefinitionsDoNotCount) {
  TempDir tmp;
  const auto dir = tmp.path() / "run/libvirt/qemu";
  write_text(dir / "up.xml", kNovaPinned);
  write_text(dir / "down.xml",
             status_xml("down", "<vcpu>2</vcpu>",
                        "<cputune><vcpupin vcpu='0' cpuset='5'/></cputune>", "shutoff"));
  write_text(dir / "up.pid", "4242");  // libvirt's other files beside the status files
  std::filesystem::create_directories(dir / "domain-1-up");
  auto domains = read_running_domains(dir);
  ASSERT_TRUE(domains) << domains.error().message();
  ASSERT_EQ(domains->size(), 1u);
  EXPECT_EQ((*domains)[0].name, "libvirt:instance-0000002a");

  // A definition (/etc/libvirt/qemu) says nothing of whether the guest runs: refused.
  write_text(dir / "defined.xml", "<domain type='kvm'><name>defined</name><vcpu>1</vcpu></domain>");
  auto refused = read_running_domains(dir);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("defined.xml"), std::string::npos);
  EXPECT_NE(refused.error().message().find("not libvirt's status"), std::string::npos);

  // No libvirt on the host: no domain, no error.
  auto none = read_running_domains(tmp.path() / "absent");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(LibvirtDomains, HostileXmlIsRefusedNamingTheFile) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"<vcpu>4</vcpu>", "<cputune><vcpupin vcpu='0' cpuset='0-4294967295'/></cputune>"},
      {"<vcpu>4</vcpu>", "<cputune><vcpupin vcpu='4' cpuset='1'/></cputune>"},
      {"<vcpu>4</vcpu>", "<cputune><vcpupin vcpu='-1' cpuset='1'/></cputune>"},
      {"<vcpu>4</vcpu>", "<cputune><vcpupin vcpu='0' cpuset='3-1'/></cputune>"},
      {"<vcpu>4</vcpu>", "<cputune><vcpupin vcpu='0' cpuset='^1'/></cputune>"},
      {"<vcpu>99999999999</vcpu>", ""},
      {"<vcpu>0</vcpu>", ""},
      {"<vcpu>1</vcpu>", "<numatune><memory nodeset='4096'/></numatune>"},
      {"<vcpu>1</vcpu>",
       "<memoryBacking><hugepages><page size='3' unit='KiB'/></hugepages></memoryBacking>"},
      {"<vcpu>1</vcpu>",
       "<memoryBacking><hugepages><page size='18446744073709551615' "
       "unit='GiB'/></hugepages></memoryBacking>"},
      {"<vcpu>1</vcpu>",
       "<cpu><numa><cell id='0' cpus='0' memory='1' unit='parsecs'/></numa></cpu>"},
      {"<vcpu>2</vcpu>",
       "<cpu><numa><cell id='0' cpus='0-1' memory='1'/>"
       "<cell id='1' cpus='1' memory='1'/></numa></cpu>"},
      {"<vcpu>1</vcpu>",
       "<devices><hostdev type='pci'><source><address domain='0x0000' "
       "bus='0x100' slot='0x00' function='0x0'/></source></hostdev></devices>"},
      {"<vcpu>1</vcpu>",
       "<devices><hostdev type='pci'><source><address bus='0x01' "
       "slot='0x20' function='0x0'/></source></hostdev></devices>"},
      {"<vcpu>1</vcpu>", "<devices><hostdev type='pci'><source/></hostdev></devices>"},
  };
  for (const auto& [vcpu, body] : cases) {
    auto d = domain_placement("evil.xml", status_xml("evil", vcpu, body));
    ASSERT_FALSE(d) << vcpu << body;
    EXPECT_EQ(d.error().code, ErrorCode::bad_input);
    EXPECT_EQ(d.error().input, "evil.xml") << d.error().message();
  }
  // Entities (a billion laughs) come only with a DTD, and libvirt writes none.
  auto dtd = domain_placement("evil.xml",
                              "<!DOCTYPE d [<!ENTITY a 'aaaa'>]><domain><name>&a;</name>"
                              "<vcpu>1</vcpu></domain>");
  ASSERT_FALSE(dtd);
  EXPECT_NE(dtd.error().message().find("DTD"), std::string::npos);
  EXPECT_FALSE(domain_placement("evil.xml", "<domain><name>x</name>"));  // no <vcpu>
  EXPECT_FALSE(domain_placement("evil.xml", "<domain>"));
  EXPECT_FALSE(domain_placement("evil.xml", "<hwloc/>"));
  EXPECT_FALSE(domain_placement("evil.xml", status_xml("a\x01b", "<vcpu>1</vcpu>", "")));
}

// What a domain holds on the AWS g4dn.metal capture: node 0 is PUs 0-23,48-71 with 5281 pages of
// 2 MiB and GPUs 0000:18:00.0 ... 0000:36:00.0; node 1 is 24-47,72-95 with 5280 pages.
TEST(LibvirtDomains, FitAvoidsWhatARunningDomainHolds) {
  const HostView view = view_of(fixture(kG4dn));
  // A guest holding every 2 MiB page of node 0 (5281 pages = 10562 MiB) and its first PUs.
  Placement held = parse(status_xml(
      "instance-00000001", "<vcpu>2</vcpu>",
      "<memoryBacking><hugepages><page size='2048' unit='KiB'/></hugepages></memoryBacking>"
      "<cputune><vcpupin vcpu='0' cpuset='0'/><vcpupin vcpu='1' cpuset='48'/></cputune>"
      "<numatune><memnode cellid='0' nodeset='0'/></numatune>"
      "<cpu><numa><cell id='0' cpus='0-1' memory='10562' unit='MiB'/></numa></cpu>"
      "<devices><hostdev mode='subsystem' type='pci'><source><address domain='0x0000' "
      "bus='0x18' slot='0x00' function='0x0'/></source></hostdev></devices>"));
  auto usage = usage_of(view, {held});
  ASSERT_TRUE(usage) << usage.error().message();
  EXPECT_EQ(usage->cells[0].held.to_list(), "0,48");
  EXPECT_EQ(usage->cells[0].pages_used[1], 5281u);
  EXPECT_TRUE(usage->devices.count("0000:18:00.0"));

  auto pages =
      testing::request(1, 1, {{"hw:cpu_policy", "dedicated"}, {"hw:mem_page_size", "2MiB"}});
  EXPECT_EQ(testing::fit_on(view, pages).placement.cells[0].host_numa_node, 0u)
      << "without the domain, node 0 (the test would not see the difference otherwise)";
  auto with = testing::fit_on(view, pages, {held});
  ASSERT_TRUE(with.fit) << with.reason;
  EXPECT_EQ(with.placement.cells[0].host_numa_node, 1u) << "node 0's pages are the domain's";

  auto pus = testing::request(2, 1, {{"hw:cpu_policy", "dedicated"}});
  auto pinned = testing::fit_on(view, pus, {held});
  ASSERT_TRUE(pinned.fit) << pinned.reason;
  EXPECT_FALSE(pinned.placement.held_pus.intersects(held.held_pus))
      << pinned.placement.held_pus.to_list();
  EXPECT_TRUE(testing::fit_on(view, pus).placement.held_pus.intersects(held.held_pus))
      << "without the domain the fit takes PUs 0 and 48";
}

TEST(LibvirtDomains, ForeignGuestsAreCountedNotRefused) {
  // Pinned outside Nova's cpu_dedicated_set, onto a PU another guest pins too, on a device the
  // fit does not offer: facts of the host, counted as they are.
  HostPolicy policy;
  policy.cpu_dedicated_set = CpuSet::parse_list("2-23");
  const HostView view = view_of(fixture(kG4dn), policy);
  Placement a = parse(status_xml("a", "<vcpu>1</vcpu>",
                                 "<cputune><vcpupin vcpu='0' cpuset='0'/></cputune>"
                                 "<devices><hostdev type='pci'><source><address bus='0x99' "
                                 "slot='0x1f' function='0x7'/></source></hostdev></devices>"));
  Placement b = parse(status_xml("b", "<vcpu>2</vcpu>",
                                 "<cputune><vcpupin vcpu='0' cpuset='0'/>"
                                 "<vcpupin vcpu='1' cpuset='2'/></cputune>"));
  auto usage = usage_of(view, {a, b});
  ASSERT_TRUE(usage) << usage.error().message();
  EXPECT_EQ(usage->cells[0].held.to_list(), "2");
}

TEST(LibvirtDomains, StoreReadsDomainsAndNeverWritesThem) {
  TempDir tmp;
  const auto dir = tmp.path() / "qemu";
  const auto state_path = tmp.path() / "allocations.json";
  write_text(dir / "instance-0000002a.xml", kNovaPinned);
  // Started from `place --libvirt --name vm1`: the domain is placement vm1, counted once.
  write_text(dir / "vm1.xml", status_xml("vm1", "<vcpu>1</vcpu>",
                                         "<cputune><vcpupin vcpu='0' cpuset='10'/></cputune>"));
  AllocationStore store(state_path, dir);
  Placement vm1;
  vm1.name = "vm1";
  vm1.vcpus = 1;
  vm1.held_pus = CpuSet{10};
  ASSERT_TRUE(store.update([&](AllocationState& s) -> Result<bool> {
    EXPECT_EQ(s.domains.size(), 2u);
    s.placements.push_back(vm1);
    return true;
  }));
  auto state = store.load();
  ASSERT_TRUE(state) << state.error().message();
  ASSERT_EQ(state->placements.size(), 1u);
  ASSERT_EQ(state->domains.size(), 1u);
  EXPECT_EQ(state->domains[0].name, "libvirt:instance-0000002a");
  EXPECT_EQ(state->all().size(), 2u);
  const std::string written = polyaccel::testing::read_text(state_path);
  EXPECT_EQ(written.find("libvirt"), std::string::npos) << written;
  // Without the directory, the state file alone.
  auto alone = AllocationStore(state_path).load();
  ASSERT_TRUE(alone);
  EXPECT_TRUE(alone->domains.empty());
  // A placement name cannot pass for a domain.
  EXPECT_FALSE(check_placement_name("libvirt:x", "--name"));
  // issue 40 (7): C1 controls and bidi overrides, named.
  for (const char* bad : {"vm\u009b2J", "vm\u0085", "vm-\u202Egnp", "vm\u2066x"}) {
    auto r = check_placement_name(bad, "--name");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message().find("a control or bidi character"), std::string::npos)
        << r.error().message();
  }
  EXPECT_TRUE(check_placement_name("caf\u00e9-\u65e5\u672c", "--name"));
}

// issue 40 (6): a running guest named as a placement but pinned to other PUs is another guest:
// both count (its PUs are not offered again) and the clash is named.
TEST(LibvirtDomains, AGuestNamedAsAPlacementButPinnedElsewhereCountsToo) {
  TempDir tmp;
  const auto dir = tmp.path() / "qemu";
  const auto state_path = tmp.path() / "allocations.json";
  write_text(dir / "vm1.xml", status_xml("vm1", "<vcpu>2</vcpu>",
                                         "<cputune><vcpupin vcpu='0' cpuset='84'/>"
                                         "<vcpupin vcpu='1' cpuset='85'/></cputune>"));
  AllocationStore store(state_path, dir);
  Placement vm1;
  vm1.name = "vm1";
  vm1.vcpus = 1;
  vm1.held_pus = CpuSet{10};
  ASSERT_TRUE(store.update([&](AllocationState& s) -> Result<bool> {
    s.placements.push_back(vm1);
    return true;
  }));
  auto state = store.load();
  ASSERT_TRUE(state) << state.error().message();
  ASSERT_EQ(state->placements.size(), 1u);
  ASSERT_EQ(state->domains.size(), 1u);
  EXPECT_EQ(state->domains[0].held_pus.to_list(), "84-85");
  ASSERT_EQ(state->name_clashes.size(), 1u);
  EXPECT_EQ(state->name_clashes[0],
            "libvirt guest 'vm1' runs on PUs 84-85, not on placement 'vm1''s 10: both are counted");
}

}  // namespace
}  // namespace polyaccel::place
