#include "render/nccl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/strings.h"

namespace polyaccel {

namespace {

std::string hex(unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, value);
  return buf;
}

std::string speed_text(double gts) {
  char buf[32];
  if (gts == 2.5) return "2.5 GT/s PCIe";
  std::snprintf(buf, sizeof buf, "%.1f GT/s PCIe", gts);
  return buf;
}

// "9.0" → 90: NCCL's sm attribute.
std::optional<unsigned> sm_of(const Accelerator& a) {
  if (!a.inventory || a.inventory->compute_capability.empty()) return std::nullopt;
  auto cc = compute_capability_numbers(a.inventory->compute_capability);
  if (!cc) return std::nullopt;
  return cc->first * 10 + cc->second;
}

// "043f:7203:00ae:a282" → "0x043f720300aea282".
std::string guid_hex(const std::string& node_guid) {
  std::string digits;
  for (char c : node_guid) {
    if (c != ':') digits += c;
  }
  return digits.empty() ? std::string() : "0x" + digits;
}

struct Leaf {
  const Accelerator* gpu = nullptr;
  std::vector<const Nic*> nic_functions;  // the functions of one NIC, function 0 first
  const PciDevice& pci() const { return gpu ? gpu->pci : nic_functions.front()->pci; }
};

struct SwitchNode {
  PciSwitch sw;
  std::map<PciAddress, SwitchNode> switches;
  std::map<PciAddress, Leaf> leaves;
  PciLink widest;  // the best link below it: the switch's uplink is at least as fast
};

struct CpuNode {
  std::map<PciAddress, SwitchNode> switches;
  std::map<PciAddress, Leaf> leaves;
};

void widen(PciLink& into, const PciLink& l) {
  NcclPciLink a = nccl_pci_link(into), b = nccl_pci_link(l);
  auto bw = [](const NcclPciLink& x) {
    return x.speed.empty() ? 0.0 : std::atof(x.speed.c_str()) * x.width;
  };
  if (bw(b) > bw(a)) into = l;
}

class Writer {
 public:
  Writer(const HostModel& m, const NcclTopoOptions& o) : model_(m), options_(o) {}

  std::string render() {
    build();
    out_ << "<system version=\"1\">\n";
    for (const auto& [numa, cpu] : cpus_)
      write_cpu(numa, cpu);
    out_ << "</system>\n";
    return out_.str();
  }

 private:
  bool wanted(const PciDevice& d) const {
    return !options_.guest || options_.guest->addresses.count(d.address) > 0;
  }

  std::string busid(const PciAddress& host) const {
    if (!options_.guest) return host.to_string();
    auto it = options_.guest->addresses.find(host);
    return it != options_.guest->addresses.end() ? it->second.to_string() : host.to_string();
  }

  // The NUMA node of the CPU a device hangs below: its first node with CPUs (in a guest, the
  // guest node it was placed on).
  unsigned numa_of(const PciDevice& d) const {
    if (options_.guest) {
      auto it = options_.guest->numa_nodes.find(d.address);
      return it != options_.guest->numa_nodes.end() ? it->second : 0;
    }
    for (unsigned n : d.numa_nodes) {
      const NumaNode* node = model_.numa_node(n);
      if (node && !node->cpus.empty()) return n;
    }
    auto nodes = model_.numa_nodes_of(d.local_cpus);
    if (!nodes.empty()) return nodes.front();
    return model_.numa_nodes.empty() ? 0 : model_.numa_nodes.front().os_index;
  }

  void insert(const Leaf& leaf) {
    const PciDevice& d = leaf.pci();
    CpuNode& cpu = cpus_[numa_of(d)];
    std::map<PciAddress, SwitchNode>* level = &cpu.switches;
    std::map<PciAddress, Leaf>* leaves = &cpu.leaves;
    for (const auto& sw : d.switches) {
      SwitchNode& node = (*level)[sw.upstream_port];
      node.sw = sw;
      widen(node.widest, d.link);
      level = &node.switches;
      leaves = &node.leaves;
    }
    (*leaves)[d.address] = leaf;
  }

  void build() {
    // dev is the device's index as the (guest's) NVML/CUDA enumerates it: PCI order of the
    // addresses the GPUs have there. NCCL matches it to its own GPUs, so inside a guest it must
    // follow the guest's bus order, not the host's.
    std::vector<std::pair<PciAddress, PciAddress>> order;  // (address seen, host address)
    for (const auto& a : model_.accelerators) {
      if ((a.vendor == Vendor::nvidia || a.vendor == Vendor::amd) && wanted(a.pci)) {
        auto seen = a.pci.address;
        if (options_.guest) {
          auto it = options_.guest->addresses.find(a.pci.address);
          if (it != options_.guest->addresses.end()) seen = it->second;
        }
        order.emplace_back(seen, a.pci.address);
        insert(Leaf{&a, {}});
      }
    }
    std::sort(order.begin(), order.end());
    for (const auto& [seen, host] : order)
      gpu_dev_[host] = static_cast<unsigned>(gpu_dev_.size());
    // RDMA NICs; without any, the Ethernet ones for NCCL's socket transport.
    bool any_rdma = std::any_of(model_.nics.begin(), model_.nics.end(),
                                [](const Nic& n) { return n.rdma_capable(); });
    std::map<PciAddress, Leaf> by_device;  // keyed by function 0's address
    for (const auto& n : model_.nics) {
      if ((any_rdma && !n.rdma_capable()) || (!any_rdma && n.netdevs.empty()) || !wanted(n.pci)) {
        continue;
      }
      PciAddress key = n.pci.address;
      key.function = 0;
      by_device[key].nic_functions.push_back(&n);
    }
    std::vector<std::string> names;
    for (const auto& [key, leaf] : by_device) {
      for (const Nic* n : leaf.nic_functions) {
        for (const auto& name : n->rdma_capable() ? n->rdma_devices : n->netdevs)
          names.push_back(name);
      }
      insert(leaf);
    }
    std::sort(names.begin(), names.end());  // NCCL's IB device order is the verbs name order
    for (size_t i = 0; i < names.size(); ++i)
      net_dev_[names[i]] = static_cast<unsigned>(i);
  }

  void indent(int depth) { out_ << std::string(static_cast<size_t>(depth) * 2, ' '); }

  void link_attrs(const PciLink& l) {
    // Unknown attributes are left out: NCCL fills absent ones from its own detection, and an
    // empty speed or a zero width would be read as a link it cannot use.
    NcclPciLink nl = nccl_pci_link(l);
    if (!nl.speed.empty()) out_ << " link_speed=\"" << nl.speed << "\"";
    if (nl.width > 0) out_ << " link_width=\"" << nl.width << "\"";
  }

  void write_cpu(unsigned numa, const CpuNode& cpu) {
    const NumaNode* node = model_.numa_node(numa);
    const Package* package = nullptr;
    for (const auto& p : model_.packages) {
      if (std::find(p.numa_nodes.begin(), p.numa_nodes.end(), numa) != p.numa_nodes.end()) {
        package = &p;
      }
    }
    if (options_.guest) {
      node = nullptr;
      package = model_.packages.empty() ? nullptr : &model_.packages.front();
    }
    indent(1);
    out_ << "<cpu numaid=\"" << numa << "\"";
    if (options_.guest) {
      auto it = options_.guest->cpus.find(numa);
      if (it != options_.guest->cpus.end())
        out_ << " affinity=\"" << cpu_mask_hex(it->second) << "\"";
    } else if (node) {
      out_ << " affinity=\"" << cpu_mask_hex(node->cpus) << "\"";
    }
    std::string arch = model_.architecture == "aarch64" ? "arm64" : model_.architecture;
    if (!arch.empty()) out_ << " arch=\"" << xml_escape(arch) << "\"";
    if (package && !package->vendor.empty())
      out_ << " vendor=\"" << xml_escape(package->vendor) << "\"";
    if (package && package->family) out_ << " familyid=\"" << *package->family << "\"";
    if (package && package->model_number) out_ << " modelid=\"" << *package->model_number << "\"";
    out_ << ">\n";
    write_level(cpu.switches, cpu.leaves, 2);
    indent(1);
    out_ << "</cpu>\n";
  }

  void write_level(const std::map<PciAddress, SwitchNode>& switches,
                   const std::map<PciAddress, Leaf>& leaves, int depth) {
    for (const auto& [address, sw] : switches) {
      indent(depth);
      std::string id = address.to_string();
      if (options_.guest) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "ffff:ff:%02x.0", virtual_switches_++ & 0x1f);
        id = buf;
      }
      out_ << "<pci busid=\"" << id << "\" class=\"0x060400\" vendor=\"" << hex(sw.sw.vendor_id, 4)
           << "\" device=\"" << hex(sw.sw.device_id, 4) << "\" subsystem_vendor=\""
           << hex(sw.sw.subsystem_vendor_id, 4) << "\" subsystem_device=\""
           << hex(sw.sw.subsystem_device_id, 4) << "\"";
      link_attrs(sw.widest);
      out_ << ">\n";
      write_level(sw.switches, sw.leaves, depth + 1);
      indent(depth);
      out_ << "</pci>\n";
    }
    for (const auto& [address, leaf] : leaves)
      write_leaf(leaf, depth);
  }

  void write_leaf(const Leaf& leaf, int depth) {
    const PciDevice& d = leaf.pci();
    indent(depth);
    out_ << "<pci busid=\"" << busid(d.address) << "\" class=\"" << hex(d.class_id, 4) << "00\""
         << " vendor=\"" << hex(d.vendor_id, 4) << "\" device=\"" << hex(d.device_id, 4)
         << "\" subsystem_vendor=\"" << hex(d.subsystem_vendor_id, 4) << "\" subsystem_device=\""
         << hex(d.subsystem_device_id, 4) << "\"";
    link_attrs(d.link);
    out_ << ">\n";
    if (leaf.gpu) write_gpu(*leaf.gpu, depth + 1);
    // In a guest the RDMA devices get the guest's own names: NCCL finds them under this <pci>.
    if (!leaf.nic_functions.empty() && !options_.guest) write_nic(leaf.nic_functions, depth + 1);
    indent(depth);
    out_ << "</pci>\n";
  }

  void write_gpu(const Accelerator& a, int depth) {
    const unsigned dev = gpu_dev_.at(a.pci.address);
    indent(depth);
    // rank is rewritten by NCCL for each communicator; dev is the PCI-order index (NVML's) of
    // the addresses written here (the guest's in a guest file).
    out_ << "<gpu dev=\"" << dev << "\"";
    if (auto sm = sm_of(a)) out_ << " sm=\"" << *sm << "\"";
    if (a.inventory && !a.inventory->gfx_version.empty()) {
      out_ << " gcn=\"" << xml_escape(a.inventory->gfx_version) << "\"";
    }
    out_ << " rank=\"" << dev << "\"";
    if (options_.gpu_direct) out_ << " gdr=\"" << (*options_.gpu_direct ? 1 : 0) << "\"";
    std::vector<const PeerLink*> nvlinks;
    for (const auto& p : a.peer_links) {
      if (p.link.level == LinkLevel::nvlink && gpu_dev_.count(p.peer)) nvlinks.push_back(&p);
    }
    if (nvlinks.empty()) {
      out_ << "/>\n";
      return;
    }
    out_ << ">\n";
    for (const PeerLink* p : nvlinks) {
      const Accelerator* peer = model_.accelerator(p->peer.to_string());
      indent(depth + 1);
      out_ << "<nvlink target=\"" << busid(p->peer) << "\" count=\"" << p->link.count
           << "\" tclass=\"" << hex(peer ? peer->pci.class_id : 0x0302, 4) << "00\"/>\n";
    }
    indent(depth);
    out_ << "</gpu>\n";
  }

  void write_nic(const std::vector<const Nic*>& functions, int depth) {
    indent(depth);
    out_ << "<nic>\n";
    for (const Nic* n : functions) {
      const auto& names = n->rdma_capable() ? n->rdma_devices : n->netdevs;
      for (const auto& name : names) {
        indent(depth + 1);
        out_ << "<net name=\"" << xml_escape(name) << "\" dev=\"" << net_dev_.at(name) << "\"";
        if (n->rdma_capable()) out_ << " port=\"1\"";
        for (const auto& o : n->pci.os_devices) {
          if (o.name == name && !o.node_guid.empty()) {
            out_ << " guid=\"" << guid_hex(o.node_guid) << "\"";
          }
        }
        if (options_.gpu_direct && n->rdma_capable()) {
          out_ << " gdr=\"" << (*options_.gpu_direct ? 1 : 0) << "\"";
        }
        out_ << "/>\n";
      }
    }
    indent(depth);
    out_ << "</nic>\n";
  }

  const HostModel& model_;
  const NcclTopoOptions& options_;
  std::map<unsigned, CpuNode> cpus_;
  std::map<PciAddress, unsigned> gpu_dev_;
  std::map<std::string, unsigned> net_dev_;
  unsigned virtual_switches_ = 0;
  std::ostringstream out_;
};

}  // namespace

std::string cpu_mask_hex(const CpuSet& cpus) {
  std::vector<unsigned> indexes = cpus.to_vector();
  const unsigned words = indexes.empty() ? 1 : indexes.back() / 32 + 1;
  std::vector<std::uint32_t> mask(words, 0);
  for (unsigned i : indexes)
    mask[i / 32] |= 1u << (i % 32);
  std::string out;
  for (unsigned w = words; w-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", mask[w]);
    if (!out.empty()) out += ",";
    out += buf;
  }
  return out;
}

NcclPciLink nccl_pci_link(const PciLink& link) {
  const double speed = link.max_speed_gts > 0 ? link.max_speed_gts : link.speed_gts;
  const unsigned width = link.max_width > 0 ? link.max_width : link.width;
  if (speed > 0 && width > 0) return {speed_text(speed), width};
  if (link.bandwidth_gbps <= 0) return {};
  // hwloc records lanes × rate × 128/130 / 8 (GB/s).
  for (unsigned w : {16u, 8u, 4u, 2u, 1u, 32u}) {
    for (double g : {64.0, 32.0, 16.0, 8.0, 5.0, 2.5}) {
      for (double encoding : {128.0 / 130.0, 0.8}) {
        double bw = w * g * encoding / 8;
        if (std::fabs(bw - link.bandwidth_gbps) < 0.01 * bw) return {speed_text(g), w};
      }
    }
  }
  return {};
}

std::string render_nccl_topology(const HostModel& model, const NcclTopoOptions& options) {
  return Writer(model, options).render();
}

}  // namespace polyaccel
