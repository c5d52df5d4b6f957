// hugepages.reserved, hugepages.1g-runtime: pinned guests need hugepages on the node they run
// on, and 1 GiB pages are reliably had only when reserved at boot; hugepages.mount: each
// reserved page size needs a hugetlbfs mount for QEMU.
#include <algorithm>
#include <map>
#include <set>

#include "audit/checks.h"
#include "audit/support.h"
#include "core/byte_size.h"

namespace polyaccel::audit {

namespace {

constexpr std::uint64_t kOneGiB = 1ull << 30;

std::vector<const NumaNode*> memory_nodes(const HostModel& m) {
  std::vector<const NumaNode*> nodes;
  for (const auto& n : m.numa_nodes) {
    if (n.kind == NumaKind::dram && n.memory_bytes > 0) nodes.push_back(&n);
  }
  return nodes;
}

const Hugepages* pages_of(const NumaNode& n, std::uint64_t size) {
  for (const auto& h : n.hugepages) {
    if (h.size_bytes == size) return &h;
  }
  return nullptr;
}

std::string nr_path(unsigned node, std::uint64_t size) {
  return "sys/devices/system/node/node" + std::to_string(node) + "/hugepages/" +
         hugepage_dir(size) + "/nr_hugepages";
}

Finding node_short(unsigned node, std::uint64_t size, std::uint64_t have, std::uint64_t want,
                   const std::string& why) {
  Finding f;
  f.id = "hugepages.reserved";
  f.severity = Severity::warning;
  f.subject = "node" + std::to_string(node);
  f.observed = std::to_string(have) + " x " + format_byte_size(size) + " pages reserved";
  f.expected = std::to_string(want) + " x " + format_byte_size(size) + " pages (" + why + ")";
  f.remedy.summary =
      "reserve the pages on this node (at run time now, at boot through the "
      "emitted per-node reservation)";
  f.remedy.runtime.push_back({nr_path(node, size), std::to_string(want)});
  return f;
}

}  // namespace

Findings check_hugepages(const AuditContext& c) {
  Findings out;
  auto nodes = memory_nodes(c.model);
  if (nodes.empty()) return out;
  const std::uint64_t size = c.intent.hugepage_size;

  // What each node should hold: the amount asked for, or on a hypervisor the most any node
  // holds (a guest pinned to a node without pages cannot start).
  std::map<unsigned, std::uint64_t> wanted;
  if (c.intent.hugepages_per_node_bytes > 0) {
    for (const auto* n : nodes)
      wanted[n->os_index] = c.intent.hugepages_per_node_bytes / size;
    for (const auto* n : nodes) {
      const Hugepages* h = pages_of(*n, size);
      if (!h) {
        Finding f;
        f.id = "hugepages.reserved";
        f.subject = "node" + std::to_string(n->os_index);
        f.observed = "no " + format_byte_size(size) + " hugepage pool";
        f.expected = format_byte_size(size) + " pages, as asked";
        f.remedy.summary = "this CPU or kernel does not offer " + format_byte_size(size) +
                           " pages; choose 2 MiB pages or check the kernel's hugepagesz= support";
        out.push_back(std::move(f));
      } else if (h->total < wanted[n->os_index]) {
        out.push_back(node_short(n->os_index, size, h->total, wanted[n->os_index],
                                 format_byte_size(c.intent.hugepages_per_node_bytes) + " a node"));
      }
    }
  } else if (c.hypervisor) {
    // Per size, the nodes that hold none while another node holds some.
    std::map<std::uint64_t, std::uint64_t> most;
    for (const auto* n : nodes) {
      for (const auto& h : n->hugepages)
        most[h.size_bytes] = std::max(most[h.size_bytes], h.total);
    }
    bool any = std::any_of(most.begin(), most.end(), [](const auto& kv) { return kv.second > 0; });
    if (!any) {
      Finding f;
      f.id = "hugepages.reserved";
      f.subject = "host";
      f.observed = "no hugepages reserved on any NUMA node";
      f.expected = "hugepages reserved on every NUMA node for the pinned guests";
      f.remedy.summary =
          "reserve the guests' memory as hugepages on each node: polyaccel audit "
          "--hugepages-per-node SIZE --emit DIR writes the per-node reservation";
      f.remedy.commands.push_back("polyaccel audit --hugepages-per-node SIZE --fix");
      out.push_back(std::move(f));
    }
    for (const auto& [page, count] : most) {
      if (count == 0) continue;
      for (const auto* n : nodes) {
        const Hugepages* h = pages_of(*n, page);
        if (h && h->total == 0) {
          out.push_back(node_short(n->os_index, page, 0, count, "as on the other nodes"));
        }
      }
    }
  }

  // hugepages.mount: QEMU (through libvirt) backs guest memory with a file on a hugetlbfs mount
  // of the page size; without one libvirt refuses the guest ("Unable to find any usable
  // hugetlbfs mount for 1048576 KiB").
  if (c.facts.mounts_known) {
    std::set<std::uint64_t> reserved;
    for (const auto* n : nodes) {
      for (const auto& h : n->hugepages) {
        if (h.total > 0) reserved.insert(h.size_bytes);
      }
    }
    for (std::uint64_t page : reserved) {
      bool mounted = false;
      for (const auto& [point, mount_size] : c.facts.hugetlbfs_mounts)
        mounted = mounted || mount_size == page;
      if (mounted) continue;
      const std::string name = format_byte_size(page);
      const std::string option = page % kOneGiB == 0 ? std::to_string(page / kOneGiB) + "G"
                                                     : std::to_string(page >> 20) + "M";
      Finding f;
      f.id = "hugepages.mount";
      f.severity = Severity::warning;
      f.subject = "hugetlbfs " + name;
      f.observed = name + " pages reserved, no hugetlbfs mount of that page size";
      f.expected = "a hugetlbfs mount with pagesize=" + option + " (libvirt and QEMU need one)";
      f.remedy.summary = "mount hugetlbfs for the page size and restart libvirtd";
      f.remedy.commands.push_back("mkdir -p /dev/hugepages" + option +
                                  " && mount -t hugetlbfs -o pagesize=" + option +
                                  " none /dev/hugepages" + option);
      out.push_back(std::move(f));
    }
  }

  // 1 GiB pages: reserved at run time they may not come back after a reboot (memory fragments),
  // so a host that uses them reserves them on the kernel command line.
  std::map<unsigned, std::uint64_t> gib_pages;
  for (const auto* n : nodes) {
    const Hugepages* h = pages_of(*n, kOneGiB);
    std::uint64_t count = h ? h->total : 0;
    if (size == kOneGiB && wanted.count(n->os_index)) {
      count = std::max(count, wanted[n->os_index]);
    }
    if (count > 0) gib_pages[n->os_index] = count;
  }
  bool boot_reserved = false;
  std::string sz;
  for (const auto& [k, v] : c.facts.kernel_args) {
    if (k == "hugepagesz") sz = v;
    if (k == "hugepages" && (sz == "1G" || sz == "1g" || sz == "1024M")) boot_reserved = true;
  }
  if (!gib_pages.empty() && c.facts.kernel_cmdline_known && !boot_reserved) {
    Finding f;
    f.id = "hugepages.1g-runtime";
    f.severity = Severity::warning;
    f.subject = "kernel";
    std::uint64_t total = 0;
    std::string per_node;
    for (const auto& [node, count] : gib_pages) {
      total += count;
      if (!per_node.empty()) per_node += ",";
      per_node += std::to_string(node) + ":" + std::to_string(count);
    }
    f.observed = std::to_string(total) + " x 1 GiB pages wanted or reserved at run time (" +
                 per_node + "), none on the kernel command line";
    f.expected = "1 GiB pages reserved at boot (hugepagesz=1G hugepages=...)";
    f.remedy.summary =
        "reserve the 1 GiB pages on the kernel command line: after a reboot memory fragments and "
        "a run-time reservation may get fewer pages";
    // Kernel 5.16 and later take a per-node list: hugepages=0:8,1:8.
    f.remedy.kernel_args = {"hugepagesz=1G", c.facts.kernel_at_least(5, 16)
                                                 ? "hugepages=" + per_node
                                                 : "hugepages=" + std::to_string(total)};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace polyaccel::audit
