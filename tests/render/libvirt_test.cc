// libvirt XML for real placements, checked by libvirt's own tools.
#include <gtest/gtest.h>

#include <fstream>

#include "place/place_test_support.h"
#include "render/libvirt.h"

namespace polyaccel::render {
namespace {

using namespace polyaccel::place::testing;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;

std::string validate(const std::string& xml, const std::string& type_for_virsh = "") {
  TempDir tmp;
  auto file = tmp.path() / "domain.xml";
  std::ofstream(file) << xml;
  auto r = run_command("virt-xml-validate '" + file.string() + "' domain 2>&1");
  if (r.exit_code != 0) return "virt-xml-validate: " + r.output;
  if (!type_for_virsh.empty()) {
    std::string copy = xml;
    copy.replace(copy.find("type='kvm'"), 10, "type='" + type_for_virsh + "'");
    std::ofstream(file) << copy;
    auto d = run_command("virsh -q -c test:///default define '" + file.string() + "' 2>&1");
    if (d.exit_code != 0) return "virsh define: " + d.output;
  }
  return "";
}

LibvirtOptions named(const std::string& name, const std::string& arch = "x86_64",
                     const std::string& machine = "q35") {
  LibvirtOptions o;
  o.name = name;
  o.arch = arch;
  o.machine = machine;
  return o;
}

TEST(Libvirt, PinnedHugepageGpuGuestValidates) {
  HostModel m = fixture(kXe8640);
  for (auto& n : m.numa_nodes) {
    for (auto& h : n.hugepages)
      h.total = h.size_bytes == (std::uint64_t{1} << 30) ? 64 : 0;
  }
  auto v = view_of(m);
  auto r = request(16, 64,
                   {{"hw:cpu_policy", "dedicated"},
                    {"hw:numa_nodes", "2"},
                    {"hw:mem_page_size", "1GB"},
                    {"hw:emulator_threads_policy", "isolate"},
                    {"pci_passthrough:alias", "h100:2"},
                    {"polyaccel:nic_affinity", "pix"},
                    {"hw:pci_numa_affinity_policy", "required"}},
                   {*place::parse_pci_alias_option("h100=10de:2330")});
  auto f = fit_on(v, r);
  ASSERT_TRUE(f.fit) << f.reason;
  LibvirtOptions options = named("vm1");
  for (const auto& core : m.cores)
    options.host_cores.push_back(core.pus);
  std::string xml = libvirt_domain_xml(f.placement, options);
  EXPECT_EQ(validate(xml, "test"), "") << xml;
  // H100 BARs: UEFI and the host's address width for a 64-bit MMIO window; vCPU pairs pinned
  // to sibling pairs are threads of one guest core.
  EXPECT_NE(xml.find("<os firmware='efi'>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<maxphysaddr mode='passthrough'/>"), std::string::npos);
  EXPECT_NE(xml.find("threads='2'/>"), std::string::npos) << xml;
  const auto& c0 = f.placement.cells[0];
  EXPECT_NE(xml.find("<vcpupin vcpu='0' cpuset='" + std::to_string(c0.pinning[0].second) + "'/>"),
            std::string::npos);
  EXPECT_NE(xml.find("<emulatorpin cpuset='" + f.placement.emulator_pus.to_list() + "'/>"),
            std::string::npos);
  EXPECT_NE(xml.find("<memnode cellid='0' mode='strict' nodeset='" +
                     std::to_string(c0.host_numa_node) + "'/>"),
            std::string::npos);
  EXPECT_NE(xml.find("<page size='1048576' unit='KiB' nodeset='0-1'/>"), std::string::npos);
  EXPECT_NE(xml.find("<cell id='1' cpus='8-15' memory='33554432' unit='KiB'/>"), std::string::npos);
  EXPECT_NE(xml.find("model='pcie-expander-bus'"), std::string::npos);
  // Two GPUs and two NICs, each with a hostdev.
  size_t hostdevs = 0;
  for (size_t pos = xml.find("<hostdev"); pos != std::string::npos;
       pos = xml.find("<hostdev", pos + 1))
    ++hostdevs;
  EXPECT_EQ(hostdevs, 4u);
  for (const auto& d : f.placement.devices) {
    auto a = *PciAddress::parse(d.pci_bus_id);
    char bus[8];
    std::snprintf(bus, sizeof bus, "0x%02x", a.bus);
    EXPECT_NE(xml.find(std::string("bus='") + bus + "' slot='0x00' function='0x" +
                       std::to_string(a.function) + "'/>\n      </source>"),
              std::string::npos)
        << d.pci_bus_id;
  }
}

TEST(Libvirt, SharedAndMixedGuestsValidate) {
  const auto& m = fixture(kG4dn);
  auto v = view_of(m);
  auto mixed = fit_on(v, request(8, 8,
                                 {{"hw:cpu_policy", "mixed"},
                                  {"hw:cpu_dedicated_mask", "^0-1"},
                                  {"hw:mem_page_size", "2MiB"}}));
  ASSERT_TRUE(mixed.fit) << mixed.reason;
  std::string xml = libvirt_domain_xml(mixed.placement, named("mixed"));
  EXPECT_EQ(validate(xml), "") << xml;
  EXPECT_NE(xml.find("<vcpupin vcpu='0' cpuset='" + mixed.placement.cells[0].shared_pus.to_list()),
            std::string::npos);
  EXPECT_NE(xml.find("<page size='2048' unit='KiB' nodeset='0'/>"), std::string::npos);
  auto floating = fit_on(v, request(4, 4, {{"pci_passthrough:alias", "t4:1"}},
                                    {*place::parse_pci_alias_option("t4=10de:1eb8")}));
  ASSERT_TRUE(floating.fit);
  std::string plain = libvirt_domain_xml(floating.placement, named("plain"));
  EXPECT_EQ(validate(plain), "") << plain;
  EXPECT_EQ(plain.find("<cputune>"), std::string::npos);
  EXPECT_NE(plain.find("<hostdev"), std::string::npos);
}

TEST(Libvirt, PowerGuestGetsAHostBridgePerCell) {
  const auto& m = fixture("power9-2socket-2numa+4gpumem-numa-4xV100-4xmlx5_llnl-sierra.v1.xml");
  auto v = view_of(m);
  auto f = fit_on(v, request(8, 16,
                             {{"hw:cpu_policy", "dedicated"},
                              {"hw:numa_nodes", "2"},
                              {"pci_passthrough:alias", "v100:2"},
                              {"hw:pci_numa_affinity_policy", "required"}},
                             {*place::parse_pci_alias_option("v100=10de")}));
  ASSERT_TRUE(f.fit) << f.reason;
  std::string xml = libvirt_domain_xml(f.placement, named("power", "ppc64le", "pseries"));
  EXPECT_EQ(validate(xml), "") << xml;
  EXPECT_NE(xml.find("<model name='spapr-pci-host-bridge'/>"), std::string::npos);
  EXPECT_EQ(xml.find("pcie"), std::string::npos);
}

}  // namespace
}  // namespace polyaccel::render
