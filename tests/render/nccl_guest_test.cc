// NCCL topology files for a guest: the placement engine's placement, the libvirt XML rendered for
// it, and the guest view read back from that XML; plus a domain as virsh dumpxml writes it.
#include "render/nccl_guest.h"

#include <gtest/gtest.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <map>

#include "discover/discover.h"
#include "place/fit.h"
#include "place/host_view.h"
#include "place/request.h"
#include "place/xml_tree.h"
#include "render/libvirt.h"
#include "support/fixture_model.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::topology_fixture;

HostModel xe8640() {
  return polyaccel::testing::fixture_model(
      "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml");
}

// Two guest cells, a GPU and its PIX NIC in each: what `polyaccel place` commits.
place::Placement two_cell_placement(const HostModel& m) {
  place::RequestInput in;
  in.vcpus = 32;
  in.memory_bytes = 16ull << 30;
  in.extra_specs = {{"hw:cpu_policy", "dedicated"},
                    {"hw:numa_nodes", "2"},
                    {"pci_passthrough:alias", "gpu:2"},
                    {"polyaccel:nic_affinity", "pix"}};
  auto alias = place::parse_pci_alias_option("gpu=10de:2330:required");
  auto request = place::parse_request(in, {*alias});
  EXPECT_TRUE(request.ok()) << request.error().message();
  auto view = place::build_host_view(m, place::HostPolicy{});
  auto r = place::fit(*view, std::vector<place::Placement>{}, *request);
  EXPECT_TRUE(r.ok() && r->fit);
  r->placement.name = "vm1";
  return r->placement;
}

using place::xml::attr;
using place::xml::child;

TEST(NcclGuest, AddressesFollowTheLibvirtXmlAndCellsTheirVcpus) {
  HostModel m = xe8640();
  place::Placement p = two_cell_placement(m);
  ASSERT_EQ(p.devices.size(), 4u);
  std::string xml = render::libvirt_domain_xml(p, render::LibvirtOptions{});
  auto view = render::nccl_guest_view(p, "vm1.xml", xml);
  ASSERT_TRUE(view.ok()) << view.error().message();

  // Independently of the product's numbering: in this layout each root port sits in slot k of a
  // pxb-pcie with busNr B, so the device behind it is on guest bus B + 1 + k.
  xmlDoc* doc = xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "vm1.xml", nullptr, 0);
  ASSERT_NE(doc, nullptr);
  std::map<unsigned, unsigned> bus_nr, port_parent, port_slot;
  std::map<std::string, unsigned> expected_bus;  // host address -> guest bus
  xmlNode* devices = child(xmlDocGetRootElement(doc), "devices");
  for (xmlNode* d = devices->children; d; d = d->next) {
    if (d->type != XML_ELEMENT_NODE) continue;
    if (xmlStrcmp(d->name, BAD_CAST "controller") == 0) {
      unsigned index = std::stoul(attr(d, "index"));
      if (attr(d, "model") == "pcie-expander-bus")
        bus_nr[index] = std::stoul(attr(child(d, "target"), "busNr"));
      if (attr(d, "model") == "pcie-root-port") {
        port_parent[index] = std::stoul(attr(child(d, "address"), "bus"), nullptr, 16);
        port_slot[index] = std::stoul(attr(child(d, "address"), "slot"), nullptr, 16);
      }
    }
    if (xmlStrcmp(d->name, BAD_CAST "hostdev") == 0) {
      xmlNode* src = child(child(d, "source"), "address");
      char host[16];
      std::snprintf(host, sizeof host, "0000:%02lx:%02lx.%lx",
                    std::stoul(attr(src, "bus"), nullptr, 16),
                    std::stoul(attr(src, "slot"), nullptr, 16),
                    std::stoul(attr(src, "function"), nullptr, 16));
      unsigned port = std::stoul(attr(child(d, "address"), "bus"), nullptr, 16);
      expected_bus[host] = bus_nr.at(port_parent.at(port)) + 1 + port_slot.at(port);
    }
  }
  xmlFreeDoc(doc);
  ASSERT_EQ(expected_bus.size(), 4u);
  ASSERT_EQ(view->addresses.size(), 4u);
  for (const auto& [host, guest] : view->addresses) {
    EXPECT_EQ(guest.bus, expected_bus.at(host.to_string())) << host.to_string();
    EXPECT_EQ(guest.device, 0);
  }
  // Guest NUMA nodes are the placement's cells, with the cells' vCPUs.
  for (const auto& d : p.devices)
    EXPECT_EQ(view->numa_nodes.at(*PciAddress::parse(d.pci_bus_id)), d.guest_cell);
  ASSERT_EQ(view->cpus.size(), 2u);
  EXPECT_EQ(view->cpus.at(0).to_list(), "0-15");
  EXPECT_EQ(view->cpus.at(1).to_list(), "16-31");

  // The file: guest bus ids, guest NUMA nodes and vCPU masks, the host's real switches.
  NcclTopoOptions options;
  options.guest = *view;
  std::string topo = render_nccl_topology(m, options);
  for (const auto& [host, guest] : view->addresses) {
    EXPECT_NE(topo.find("busid=\"" + guest.to_string() + "\""), std::string::npos) << topo;
    EXPECT_EQ(topo.find("busid=\"" + host.to_string() + "\""), std::string::npos) << topo;
  }
  EXPECT_NE(topo.find("<cpu numaid=\"0\" affinity=\"0000ffff\""), std::string::npos) << topo;
  EXPECT_NE(topo.find("<cpu numaid=\"1\" affinity=\"ffff0000\""), std::string::npos) << topo;
  EXPECT_NE(
      topo.find("busid=\"ffff:ff:00.0\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc030\""),
      std::string::npos);
  EXPECT_EQ(topo.find("<net "), std::string::npos);  // the guest names its own RDMA devices
  EXPECT_EQ(std::count(topo.begin(), topo.end(), '\n'), std::count(topo.begin(), topo.end(), '>'));
}

// A q35 guest as `virsh dumpxml` prints it: root ports on pcie-root, multifunction in slot 2.
const char* kDumpxml = R"(<domain type='kvm'>
  <name>g</name>
  <devices>
    <controller type='pci' index='0' model='pcie-root'/>
    <controller type='pci' index='1' model='pcie-root-port'>
      <model name='pcie-root-port'/><target chassis='1' port='0x10'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x0' multifunction='on'/>
    </controller>
    <controller type='pci' index='2' model='pcie-root-port'>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x1'/>
    </controller>
    <controller type='pci' index='3' model='pcie-root-port'>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x2'/>
    </controller>
    <controller type='pci' index='4' model='pcie-root-port'>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x3'/>
    </controller>
    <interface type='network'><address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></interface>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0xcb' slot='0x00' function='0x0'/></source>
      <address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0'/>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0xda' slot='0x00' function='0x0'/></source>
      <address type='pci' domain='0x0000' bus='0x04' slot='0x00' function='0x0'/>
    </hostdev>
  </devices>
</domain>
)";

place::Placement cpu_only(std::vector<std::string> devices) {
  place::Placement p;
  p.name = "g";
  p.vcpus = 8;
  for (const auto& d : devices) {
    place::DevicePlacement dp;
    dp.pci_bus_id = d;
    p.devices.push_back(dp);
  }
  return p;
}

TEST(NcclGuest, VirshDumpxmlRootPortsNumberLikeTheFirmware) {
  auto view =
      render::nccl_guest_view(cpu_only({"0000:cb:00.0", "0000:da:00.0"}), "g.xml", kDumpxml);
  ASSERT_TRUE(view.ok()) << view.error().message();
  EXPECT_EQ(view->addresses.at(*PciAddress::parse("0000:cb:00.0")).to_string(), "0000:03:00.0");
  EXPECT_EQ(view->addresses.at(*PciAddress::parse("0000:da:00.0")).to_string(), "0000:04:00.0");
  EXPECT_EQ(view->cpus.at(0).to_list(), "0-7");  // no NUMA topology: one node, every vCPU
}

TEST(NcclGuest, WrongOrBrokenXmlIsRefused) {
  auto missing = render::nccl_guest_view(cpu_only({"0000:4e:00.0"}), "g.xml", kDumpxml);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("no <hostdev> for 0000:4e:00.0"), std::string::npos);
  auto broken = render::nccl_guest_view(cpu_only({}), "g.xml", "<domain><devices>");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message().find("not well-formed"), std::string::npos);
  auto unaddressed = render::nccl_guest_view(
      cpu_only({}), "g.xml",
      "<domain><devices><hostdev type='pci'><source><address domain='0' bus='0x4e' slot='0' "
      "function='0'/></source></hostdev></devices></domain>");
  ASSERT_FALSE(unaddressed.ok());
  EXPECT_NE(unaddressed.error().message().find("no guest address"), std::string::npos);
  // A sign, blanks or a leading 0 are no address: strtoul read bus '-18446744073709551538' as
  // 0x4e, so this hostdev stood for the host's 0000:4e:00.0. Now the file is refused.
  for (const char* bus : {"-18446744073709551538", " 0x4e", "+78", "0116", "0x4e0000", "78.0"}) {
    auto wrapped = render::nccl_guest_view(
        cpu_only({"0000:4e:00.0"}), "g.xml",
        std::string("<domain><devices><hostdev type='pci'><source><address domain='0' bus='") +
            bus +
            "' slot='0' function='0'/></source><address type='pci' domain='0' bus='1' slot='0' "
            "function='0'/></hostdev></devices></domain>");
    ASSERT_FALSE(wrapped.ok()) << bus;
    EXPECT_NE(wrapped.error().message().find("g.xml: a PCI <hostdev>'s <source> <address> bus="),
              std::string::npos)
        << bus << ": " << wrapped.error().message();
  }
  // Out of a PCI address's range: refused naming the field, never read as 0000 or wrapped
  // (issue 29: domain 0x10000 was read as 0000, bus 0x1cb reported as 0000:cb:00.0).
  const std::pair<const char*, const char*> out_of_range[] = {
      {"domain='0x10000' bus='0x4e' slot='0' function='0'", "domain='0x10000'"},
      {"domain='0xffffffff' bus='0x4e' slot='0' function='0'", "domain='0xffffffff'"},
      {"domain='0x100000000' bus='0x4e' slot='0' function='0'", "domain='0x100000000'"},
      {"domain='0' bus='0x1cb' slot='0' function='0'", "bus='0x1cb' is not a number in 0..0xff"},
      {"domain='0' bus='0xcb' slot='0x20' function='0'", "slot='0x20'"},
      {"domain='0' bus='0xcb' slot='0' function='8'", "function='8'"},
  };
  for (const auto& [source, named] : out_of_range) {
    auto refused = render::nccl_guest_view(
        cpu_only({"0000:cb:00.0"}), "g.xml",
        std::string("<domain><devices><hostdev type='pci'><source><address ") + source +
            "/></source><address type='pci' domain='0' bus='0' slot='5' "
            "function='0'/></hostdev></devices></domain>");
    ASSERT_FALSE(refused.ok()) << source;
    EXPECT_EQ(refused.error().code, ErrorCode::bad_input);
    EXPECT_NE(refused.error().message().find(named), std::string::npos)
        << source << ": " << refused.error().message();
  }
}

// 60,000 pci-bridges, each plugged into the one before: the numbering was recursive (the stack
// overflowed) and quadratic. Now the guest address below the last bridge comes back, at once.
TEST(NcclGuestView, LongBridgeChainIsNumberedWithoutRecursion) {
  constexpr unsigned kBridges = 60000;
  std::string xml =
      "<domain type='kvm'><devices>\n<controller type='pci' index='0' model='pcie-root'/>\n";
  for (unsigned i = 1; i <= kBridges; ++i) {
    xml += "<controller type='pci' index='" + std::to_string(i) +
           "' model='pci-bridge'><address type='pci' domain='0x0000' bus='" +
           std::to_string(i - 1) + "' slot='0x01' function='0x0'/></controller>\n";
  }
  // On bus 1 (the first bridge): a guest address that fits PCI's 8-bit bus.
  xml +=
      "<hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x4e' "
      "slot='0x00' function='0x0'/></source><address type='pci' domain='0x0000' bus='1' "
      "slot='0x00' function='0x0'/></hostdev>\n";
  // And one below the last bridge, whose bus number is past 255: refused, not wrapped.
  std::string deep = xml;
  deep +=
      "<hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0xcb' "
      "slot='0x00' function='0x0'/></source><address type='pci' domain='0x0000' bus='" +
      std::to_string(kBridges) + "' slot='0x00' function='0x0'/></hostdev>\n";
  xml += "</devices></domain>\n";
  deep += "</devices></domain>\n";
  auto view = render::nccl_guest_view(cpu_only({"0000:4e:00.0"}), "chain.xml", xml);
  ASSERT_TRUE(view) << view.error().message();
  EXPECT_EQ(view->addresses.at(*PciAddress::parse("0000:4e:00.0")).to_string(), "0000:01:00.0");
  auto refused =
      render::nccl_guest_view(cpu_only({"0000:4e:00.0", "0000:cb:00.0"}), "chain.xml", deep);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("beyond PCI's bus 255"), std::string::npos)
      << refused.error().message();
}

}  // namespace
}  // namespace polyaccel
