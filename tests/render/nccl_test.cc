// The NCCL topology file parsed back with libxml2 and compared with the HostModel it came from,
// on the real XE8640 and JURECA-DC GPU nodes.
#include "render/nccl.h"

#include <gtest/gtest.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <map>
#include <set>

#include "discover/discover.h"
#include "place/xml_tree.h"
#include "support/fixture_model.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::fixture_model;
using polyaccel::testing::topology_fixture;

using polyaccel::testing::kXe8640;
const char* kJureca = "2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml";

using place::xml::attr;
using place::xml::is;

// What the file says, flattened: for every GPU and net, its NUMA node and the chain of <pci>
// bus ids above it (top down).
struct Parsed {
  struct Device {
    unsigned numa = 0;
    std::vector<std::string> path;  // switch bus ids, top down
    std::string busid;
    std::map<std::string, std::string> attrs;    // of <gpu> or <net>
    std::map<std::string, std::string> nvlinks;  // target → count
  };
  std::map<std::string, Device> gpus;  // by bus id
  std::map<std::string, Device> nets;  // by name
  std::map<unsigned, std::map<std::string, std::string>> cpus;
};

void walk(xmlNode* n, unsigned numa, std::vector<std::string>& path, Parsed& out) {
  for (xmlNode* c = n->children; c; c = c->next) {
    if (!is(c, "pci")) continue;
    std::string busid = attr(c, "busid");
    bool leaf = false;
    for (xmlNode* g = c->children; g; g = g->next) {
      if (is(g, "gpu")) {
        leaf = true;
        Parsed::Device d{numa, path, busid, {}, {}};
        for (xmlAttr* a = g->properties; a; a = a->next)
          d.attrs[reinterpret_cast<const char*>(a->name)] =
              attr(g, reinterpret_cast<const char*>(a->name));
        for (xmlNode* l = g->children; l; l = l->next) {
          if (is(l, "nvlink")) d.nvlinks[attr(l, "target")] = attr(l, "count");
        }
        out.gpus[busid] = d;
      }
      if (is(g, "nic")) {
        leaf = true;
        for (xmlNode* net = g->children; net; net = net->next) {
          if (!is(net, "net")) continue;
          Parsed::Device d{numa, path, busid, {}, {}};
          for (xmlAttr* a = net->properties; a; a = a->next)
            d.attrs[reinterpret_cast<const char*>(a->name)] =
                attr(net, reinterpret_cast<const char*>(a->name));
          out.nets[attr(net, "name")] = d;
        }
      }
    }
    if (!leaf) {
      EXPECT_EQ(attr(c, "class"), "0x060400") << busid;
      path.push_back(busid);
      walk(c, numa, path, out);
      path.pop_back();
    }
  }
}

Parsed parse(const std::string& xml) {
  Parsed out;
  xmlDoc* doc =
      xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "topo.xml", nullptr, XML_PARSE_NONET);
  EXPECT_NE(doc, nullptr) << xml;
  if (!doc) return out;
  xmlNode* root = xmlDocGetRootElement(doc);
  EXPECT_TRUE(is(root, "system"));
  EXPECT_EQ(attr(root, "version"), "1");
  for (xmlNode* c = root->children; c; c = c->next) {
    if (!is(c, "cpu")) continue;
    unsigned numa = static_cast<unsigned>(std::stoul(attr(c, "numaid")));
    for (xmlAttr* a = c->properties; a; a = a->next)
      out.cpus[numa][reinterpret_cast<const char*>(a->name)] =
          attr(c, reinterpret_cast<const char*>(a->name));
    std::vector<std::string> path;
    walk(c, numa, path, out);
  }
  xmlFreeDoc(doc);
  return out;
}

// Every GPU and RDMA device of the model appears once, under its NUMA node's <cpu> and below
// exactly its real switches; NVLinks match; CPU identity and affinity match.
void expect_matches_model(const HostModel& m, const Parsed& p) {
  ASSERT_EQ(p.gpus.size(), m.accelerators.size());
  for (size_t i = 0; i < m.accelerators.size(); ++i) {
    const auto& a = m.accelerators[i];
    auto it = p.gpus.find(a.pci.address.to_string());
    ASSERT_NE(it, p.gpus.end()) << a.id;
    ASSERT_EQ(a.pci.numa_nodes.size(), 1u);
    EXPECT_EQ(it->second.numa, a.pci.numa_nodes[0]) << a.id;
    std::vector<std::string> switches;
    for (const auto& s : a.pci.switches)
      switches.push_back(s.upstream_port.to_string());
    EXPECT_EQ(it->second.path, switches) << a.id;
    EXPECT_EQ(it->second.attrs.at("dev"), std::to_string(i));
    size_t nvlinks = 0;
    for (const auto& peer : a.peer_links) {
      if (peer.link.level != LinkLevel::nvlink) continue;
      ++nvlinks;
      EXPECT_EQ(it->second.nvlinks.at(peer.peer.to_string()), std::to_string(peer.link.count));
    }
    EXPECT_EQ(it->second.nvlinks.size(), nvlinks);
  }
  size_t rdma = 0;
  for (const auto& n : m.nics) {
    for (const auto& name : n.rdma_devices) {
      ++rdma;
      auto it = p.nets.find(name);
      ASSERT_NE(it, p.nets.end()) << name;
      EXPECT_EQ(it->second.numa, n.pci.numa_nodes.at(0)) << name;
      std::vector<std::string> switches;
      for (const auto& s : n.pci.switches)
        switches.push_back(s.upstream_port.to_string());
      EXPECT_EQ(it->second.path, switches) << name;
      PciAddress function0 = n.pci.address;
      function0.function = 0;
      EXPECT_EQ(it->second.busid, function0.to_string()) << name;
    }
  }
  EXPECT_EQ(p.nets.size(), rdma);
  for (const auto& [numa, attrs] : p.cpus) {
    const NumaNode* node = m.numa_node(numa);
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(attrs.at("affinity"), cpu_mask_hex(node->cpus));
    EXPECT_EQ(attrs.at("arch"), "x86_64");
  }
}

TEST(NcclTopo, Xe8640MatchesTheModel) {
  HostModel m = fixture_model(kXe8640);
  Parsed p = parse(render_nccl_topology(m));
  expect_matches_model(m, p);
  // What the fixture README states: three GPUs share a Gen5 switch with an HCA, the fourth
  // (0000:cb:00.0, NUMA 7) has none; mlx5_0 and mlx5_1 are the two ports of one ConnectX-6.
  EXPECT_EQ(p.gpus.at("0000:5f:00.0").path, p.nets.at("mlx5_2").path);
  EXPECT_EQ(p.gpus.at("0000:4e:00.0").path, p.nets.at("mlx5_0").path);
  EXPECT_EQ(p.nets.at("mlx5_0").busid, p.nets.at("mlx5_1").busid);
  EXPECT_EQ(p.gpus.at("0000:db:00.0").path, p.nets.at("mlx5_3").path);
  for (const auto& [name, net] : p.nets)
    EXPECT_NE(net.path, p.gpus.at("0000:cb:00.0").path) << name;
  EXPECT_EQ(p.gpus.at("0000:4e:00.0").nvlinks.at("0000:5f:00.0"), "6");
  EXPECT_EQ(p.nets.at("mlx5_0").attrs.at("guid"), "0x043f720300aea282");
  EXPECT_EQ(p.cpus.at(1).at("vendor"), "GenuineIntel");
  EXPECT_EQ(p.cpus.at(1).at("familyid"), "6");
  EXPECT_EQ(p.cpus.at(1).at("modelid"), "143");
  EXPECT_EQ(p.cpus.size(), 4u);  // NUMA 1, 3, 5, 7: the nodes with a GPU or an HCA
  // No guess for what the model does not know: NCCL fills these itself.
  EXPECT_EQ(p.gpus.at("0000:4e:00.0").attrs.count("sm"), 0u);
  EXPECT_EQ(p.gpus.at("0000:4e:00.0").attrs.count("gdr"), 0u);
}

TEST(NcclTopo, JurecaOneGpuAndOneHcaPerSwitch) {
  HostModel m = fixture_model(kJureca);
  Parsed p = parse(render_nccl_topology(m, NcclTopoOptions{true, {}}));
  expect_matches_model(m, p);
  std::set<std::vector<std::string>> gpu_switches;
  for (const auto& [busid, gpu] : p.gpus) {
    ASSERT_EQ(gpu.path.size(), 1u) << busid;
    gpu_switches.insert(gpu.path);
    EXPECT_EQ(gpu.attrs.at("gdr"), "1");
    size_t hcas_here = 0;
    for (const auto& [name, net] : p.nets)
      hcas_here += net.path == gpu.path;
    EXPECT_EQ(hcas_here, 1u) << busid;
  }
  EXPECT_EQ(gpu_switches.size(), 4u);
  EXPECT_EQ(p.cpus.at(1).at("vendor"), "AuthenticAMD");
  EXPECT_EQ(p.cpus.at(1).at("familyid"), "23");
}

TEST(NcclTopo, PciLinkFromSysfsOrHwlocBandwidth) {
  PciLink sysfs;
  sysfs.speed_gts = 16;
  sysfs.width = 8;
  sysfs.max_speed_gts = 32;
  sysfs.max_width = 16;
  EXPECT_EQ(nccl_pci_link(sysfs).speed, "32.0 GT/s PCIe");
  EXPECT_EQ(nccl_pci_link(sysfs).width, 16u);
  PciLink hwloc;
  hwloc.bandwidth_gbps = 63.015385;  // what hwloc writes for Gen5 x16
  EXPECT_EQ(nccl_pci_link(hwloc).speed, "32.0 GT/s PCIe");
  EXPECT_EQ(nccl_pci_link(hwloc).width, 16u);
  hwloc.bandwidth_gbps = 7.876923;  // Gen3 x8
  EXPECT_EQ(nccl_pci_link(hwloc).speed, "8.0 GT/s PCIe");
  EXPECT_EQ(nccl_pci_link(hwloc).width, 8u);
  EXPECT_EQ(nccl_pci_link(PciLink{}).speed, "");
  EXPECT_EQ(cpu_mask_hex(*CpuSet::parse_list("0-3,32")), "00000001,0000000f");
  EXPECT_EQ(cpu_mask_hex(CpuSet{}), "00000000");
}

}  // namespace
}  // namespace polyaccel
