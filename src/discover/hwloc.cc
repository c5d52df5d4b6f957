// hwloc → HostModel. The only file that includes hwloc.h.
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "core/file_io.h"
#include "core/number.h"
#include "core/strings.h"
#include "discover/hwloc_source.h"

namespace polyaccel::detail {

namespace {

namespace fs = std::filesystem;

// Sets process environment variables for the duration of one load, then restores them. hwloc
// reads HWLOC_FSROOT and friends from the environment only.
class ScopedEnv {
 public:
  void set(const char* name, const std::string& value) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

struct Topology {
  hwloc_topology_t t = nullptr;
  ~Topology() {
    if (t) hwloc_topology_destroy(t);
  }
};

CpuSet to_cpuset(hwloc_const_bitmap_t bitmap) {
  CpuSet out;
  if (!bitmap) return out;
  if (hwloc_bitmap_weight(bitmap) < 0) return out;  // infinite: ignore
  int i = -1;
  while ((i = hwloc_bitmap_next(bitmap, i)) != -1)
    out.set(static_cast<unsigned>(i));
  return out;
}

std::string info(hwloc_obj_t obj, const char* name) {
  const char* v = obj ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
  return v ? v : "";
}

std::optional<unsigned> info_number(hwloc_obj_t obj, const char* name) {
  std::string text = info(obj, name);
  if (text.empty()) return std::nullopt;
  bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  auto v = hex ? parse_hex(text, name, std::numeric_limits<unsigned>::max())
               : parse_unsigned(text, name, 0, std::numeric_limits<unsigned>::max());
  if (!v) return std::nullopt;  // a capture's odd info value is not a number we use
  return static_cast<unsigned>(*v);
}

Error xml_error(const std::string& path, const std::string& problem,
                const std::string& remedy = {}) {
  return bad_input(path, problem, remedy);
}

// One start tag of an hwloc XML file, its attributes as written.
struct XmlTag {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;
  const std::string* attribute(std::string_view key) const {
    for (const auto& [k, v] : attributes)
      if (k == key) return &v;
    return nullptr;
  }
};

// Reads the start tag at `at` (just past '<') in the one grammar libhwloc's own XML reader
// accepts: attribute names of a-z and '_', each followed by `="value"`. Anything else (an
// unquoted value, a stray character, a repeated attribute) is refused here: libhwloc 2.9 stops
// reading the tag's attributes there and then dereferences the cpusets it never set.
// On success `at` is past the tag's '>'.
Result<XmlTag> read_start_tag(const std::string& path, const std::string& text, size_t& at,
                              size_t line) {
  auto bad = [&](const std::string& what) -> Error {
    return xml_error(path, "line " + std::to_string(line) + ": " + what + " (hwloc cannot load it)",
                     "export the topology again with lstopo-no-graphics --of xml");
  };
  auto is_name = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  XmlTag tag;
  size_t i = at;
  while (i < text.size() && is_name(text[i]))
    ++i;
  tag.name = text.substr(at, i - at);
  if (tag.name.empty()) return bad("a '<' that starts no element");
  const std::string element = "<" + printable(tag.name) + ">";
  while (true) {
    size_t before = i;
    while (i < text.size() && is_space(text[i]))
      ++i;
    if (i >= text.size()) return bad(element + " is not closed");
    if (text[i] == '>' || (text[i] == '/' && i + 1 < text.size() && text[i + 1] == '>')) {
      at = i + (text[i] == '>' ? 1 : 2);
      return tag;
    }
    if (i == before) return bad(element + " has no space before an attribute");
    size_t name_begin = i;
    while (i < text.size() && ((text[i] >= 'a' && text[i] <= 'z') || text[i] == '_'))
      ++i;
    std::string name = text.substr(name_begin, i - name_begin);
    if (name.empty() || i + 1 >= text.size() || text[i] != '=' || text[i + 1] != '"') {
      size_t shown = std::min<size_t>(i - name_begin + 16, text.size() - name_begin);
      return bad(element + " has a malformed attribute near '" +
                 printable(text.substr(name_begin, shown)) + "' (hwloc writes name=\"value\")");
    }
    size_t value_begin = i + 2;
    size_t value_end = text.find('"', value_begin);
    if (value_end == std::string::npos) return bad(element + " has an unterminated attribute");
    if (tag.attribute(name)) return bad(element + " repeats the attribute " + printable(name));
    tag.attributes.emplace_back(std::move(name), text.substr(value_begin, value_end - value_begin));
    i = value_end + 1;
  }
}

// Checks every start tag's syntax (above) and the object shapes that crash libhwloc itself
// (2.9 dereferences a missing complete set in hwloc_topology_load, and lstopo with it): an
// object with a cpuset but no complete_cpuset, a nodeset but no complete_nodeset, a PU without a
// cpuset. Every export hwloc writes has them all.
// An hwloc bitmap as XML writes it, "0x00000040,,0x00400000": 32-bit words, highest first.
bool bitmap_beyond(const std::string& bitmap, unsigned max_index) {
  size_t words = static_cast<size_t>(std::count(bitmap.begin(), bitmap.end(), ',')) + 1;
  return words > max_index / 32 + 1;
}

// The form hwloc's XML export writes a bitmap in, and the only one its reader is sure to load:
// 32-bit words "0x" and one to eight hex digits, highest first, an all-zero word left empty
// ("0x00000400,,0x0"), an infinite set starting "0xf...f". A word hwloc_bitmap_sscanf cannot
// read leaves the object without that set, which libhwloc 2.9 then dereferences (fuzzing:
// complete_cpuset "0x00000400,&0x0", SEGV in hwloc_bitmap_compare_first).
bool bitmap_well_formed(const std::string& bitmap) {
  std::string_view rest(bitmap);
  if (rest.substr(0, 7) == "0xf...f") {
    rest.remove_prefix(7);
    if (rest.empty()) return true;
    if (rest.front() != ',') return false;
    rest.remove_prefix(1);
  }
  size_t words = 0;
  for (;;) {
    size_t comma = rest.find(',');
    std::string_view word = rest.substr(0, comma);
    const bool last = comma == std::string_view::npos;
    if (word.empty()) {
      if (words == 0 || last) return false;  // hwloc writes neither a leading nor a trailing ","
    } else {
      if (word.size() < 3 || word.size() > 10 || word.substr(0, 2) != "0x") return false;
      for (char c : word.substr(2)) {
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
      }
    }
    ++words;
    if (last) return true;
    rest.remove_prefix(comma + 1);
  }
}

// XML 1.0 has no control characters but tab, newline and carriage return; libhwloc reads the
// file as a C string, so a NUL ends it where its parser does not expect (fuzzing: a NUL inside
// the <topology> tag, a read past the buffer in strspn).
std::optional<size_t> control_byte_line(const std::string& text) {
  size_t line = 1;
  for (unsigned char c : text) {
    if (c == '\n') ++line;
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return line;
    if (c == 0x7f) return line;
  }
  return std::nullopt;
}

Status check_tags(const std::string& path, const std::string& text) {
  if (auto bad = control_byte_line(text)) {
    return xml_error(path,
                     "line " + std::to_string(*bad) + " has a control character (XML has none)",
                     "export the topology again with lstopo-no-graphics --of xml");
  }
  size_t line = 1, counted = 0;
  for (size_t at = text.find('<'); at != std::string::npos; at = text.find('<', at)) {
    line += static_cast<size_t>(std::count(text.begin() + static_cast<long>(counted),
                                           text.begin() + static_cast<long>(at), '\n'));
    counted = at;
    // Declarations, comments and end tags carry nothing hwloc reads as attributes.
    std::string_view rest(text.data() + at, text.size() - at);
    size_t skip = std::string_view::npos;
    if (rest.substr(0, 4) == "<!--") {
      skip = rest.find("-->");
      if (skip != std::string_view::npos) skip += 3;
    } else if (rest.substr(0, 2) == "<?") {
      skip = rest.find("?>");
      if (skip != std::string_view::npos) skip += 2;
    } else if (rest.substr(0, 2) == "<!" || rest.substr(0, 2) == "</") {
      skip = rest.find('>');
      if (skip != std::string_view::npos) skip += 1;
    }
    // A '<' inside: hwloc's reader may take it as the next tag, which the skip would hide.
    if (skip != std::string_view::npos && rest.substr(1, skip - 1).find('<') == std::string::npos) {
      at += skip;
      continue;
    }
    // Unterminated: libhwloc's reader goes on reading tags past it, so must the pre-check
    // (fuzzing: "<?xml " without "?>" hid an object without complete_cpuset, SEGV in hwloc).
    if (rest.size() >= 2 && (rest[1] == '!' || rest[1] == '?' || rest[1] == '/')) {
      return xml_error(
          path,
          "line " + std::to_string(line) + ": a declaration, comment or end tag is not closed",
          "export the topology again with lstopo-no-graphics --of xml");
    }
    size_t tag_at = at + 1;
    auto tag = read_start_tag(path, text, tag_at, line);
    if (!tag) return tag.error();
    if (tag->name != "object") {
      // cpukind and the like carry sets too, read by the same hwloc_bitmap_sscanf.
      for (const auto& [name, value] : tag->attributes) {
        const bool set = name.ends_with("cpuset") || name.ends_with("nodeset");
        if (set && !bitmap_well_formed(value)) {
          return xml_error(path,
                           "line " + std::to_string(line) + ": <" + printable(tag->name) +
                               "> has " + name + " " + printable(value) +
                               ", not a bitmap as hwloc writes it",
                           "export the topology again with lstopo-no-graphics --of xml");
        }
      }
    }
    if (tag->name == "object") {
      const std::string* type = tag->attribute("type");
      std::string problem;
      if (type && *type == "PU" && !tag->attribute("cpuset")) {
        problem = "has no cpuset (hwloc cannot load it)";
      } else if (tag->attribute("cpuset") && !tag->attribute("complete_cpuset")) {
        problem = "has a cpuset but no complete_cpuset (hwloc cannot load it)";
      } else if (tag->attribute("nodeset") && !tag->attribute("complete_nodeset")) {
        problem = "has a nodeset but no complete_nodeset (hwloc cannot load it)";
      } else if (type && (*type == "PU" || *type == "NUMANode")) {
        const bool pu = *type == "PU";
        const unsigned max = pu ? kMaxCpuIndex : kMaxNodeIndex;
        const std::string* os_index = tag->attribute("os_index");
        if (!os_index) {
          problem = "has no os_index";
        } else if (!parse_unsigned(*os_index, "os_index", 0, max)) {
          problem = "has os_index " + printable(*os_index) + ", not a number up to " +
                    std::to_string(max) + " (Linux numbers " + (pu ? "CPUs" : "NUMA nodes") +
                    " below that)";
        }
      }
      // Values hwloc loads into its enums as they are: one outside the enum is undefined
      // behaviour in every reader of the object (hwloc 2.9 knows these).
      const std::string* bridge = tag->attribute("bridge_type");
      const std::string* cache = tag->attribute("cache_type");
      const std::string* osdev = tag->attribute("osdev_type");
      if (problem.empty() && bridge && *bridge != "0-1" && *bridge != "1-1") {
        problem = "has bridge_type " + printable(*bridge) + " (hwloc 2 knows 0-1 and 1-1)";
      } else if (problem.empty() && cache && !parse_unsigned(*cache, "cache_type", 0, 2)) {
        problem = "has cache_type " + printable(*cache) + " (hwloc 2 knows 0 to 2)";
      } else if (problem.empty() && osdev && !parse_unsigned(*osdev, "osdev_type", 0, 5)) {
        problem = "has osdev_type " + printable(*osdev) + " (hwloc 2.9 knows 0 to 5)";
      }
      for (const auto& [name, value] : tag->attributes) {
        if (!problem.empty()) break;
        const bool cpus = name.ends_with("cpuset");
        const bool nodes = name.ends_with("nodeset");
        if ((cpus || nodes) && !bitmap_well_formed(value)) {
          problem = "has " + name + " " + printable(value) +
                    ", not a bitmap as hwloc writes it (0x-prefixed 32-bit hex words, highest "
                    "first)";
        } else if ((cpus && bitmap_beyond(value, kMaxCpuIndex)) ||
                   (nodes && bitmap_beyond(value, kMaxNodeIndex))) {
          problem = "has a " + name + " beyond " + (cpus ? "CPU " : "NUMA node ") +
                    std::to_string(cpus ? kMaxCpuIndex : kMaxNodeIndex);
        }
      }
      if (!problem.empty()) {
        return xml_error(path,
                         "line " + std::to_string(line) + ": object " +
                             printable(type ? *type : "?") + " " + problem,
                         "export the topology again with lstopo-no-graphics --of xml");
      }
    }
    at = tag_at;
  }
  return Ok{};
}

// The checks hwloc does not make, so that a bad file gets one clear line, not a crash. Returns
// the text, which hwloc then reads from memory: the file is opened once, by read_input_file.
Result<std::string> check_xml_file(const std::string& path) {
  auto text = read_input_file(path, kMaxTopologyXmlBytes, "hwloc XML");
  if (!text) return text.error();
  if (text->find_first_not_of(" \t\r\n") == std::string::npos) return xml_error(path, "is empty");
  size_t top = text->find("<topology");
  if (top == std::string::npos) {
    return xml_error(path, "is not an hwloc XML topology (no <topology> element)",
                     "export one with `lstopo-no-graphics --of xml FILE`");
  }
  size_t tag_end = text->find('>', top);
  std::string tag = text->substr(top, tag_end == std::string::npos ? 64 : tag_end - top);
  if (tag.find("version=\"3.") != std::string::npos) {
    return xml_error(path, "is hwloc XML format 3.0, which hwloc 2 cannot read",
                     "export it with hwloc 3's V2 export flag or with hwloc 2");
  }
  if (text->find("</topology>") == std::string::npos) {
    return xml_error(path, "is truncated (no closing </topology>)");
  }
  if (auto st = check_tags(path, *text); !st) return st.error();
  return text;
}

// CXL memory as hwloc names it: the subtypes of hwloc 2.10+ ("CXL-DRAM"), or the infos hwloc
// 2.9 puts on a node onlined from a CXL DAX region (DAXType "CXLMem", CXLRAMSize/CXLPMEMSize).
bool is_cxl_memory(hwloc_obj_t o, const std::string& subtype) {
  if (subtype.rfind("CXL", 0) == 0) return true;
  return info(o, "DAXType") == "CXLMem" || !info(o, "CXLRAMSize").empty() ||
         !info(o, "CXLPMEMSize").empty();
}

NumaKind numa_kind(hwloc_obj_t o, const std::string& subtype, bool has_cpus) {
  if (subtype == "HBM" || subtype == "MCDRAM") return NumaKind::hbm;
  if (subtype == "GPUMemory") return NumaKind::gpu_memory;
  if (is_cxl_memory(o, subtype)) return NumaKind::cxl;
  // Persistent memory onlined as a node. (A DAXDevice info alone says nothing: the Xeon Max HBM
  // nodes are onlined from DAX devices too, and hwloc 2.9 may call them "SPM".)
  if (subtype == "NVM") return NumaKind::cpuless;
  if (subtype == "SPM") return has_cpus ? NumaKind::dram : NumaKind::cpuless;
  if (subtype == "DRAM") return NumaKind::dram;
  if (!subtype.empty() || !has_cpus) return NumaKind::cpuless;
  return NumaKind::dram;
}

// On-package HBM exists only on the processors built with it: Xeon CPU Max (Sapphire Rapids
// HBM) and Xeon Phi (MCDRAM). Elsewhere a memory-only node is a CXL expander or unknown.
bool package_has_hbm(hwloc_topology_t t, hwloc_obj_t node) {
  hwloc_obj_t pkg = nullptr;
  while ((pkg = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, pkg))) {
    if (!hwloc_bitmap_isincluded(node->cpuset, pkg->cpuset) &&
        !hwloc_bitmap_isincluded(pkg->cpuset, node->cpuset))
      continue;
    const std::string model = info(pkg, "CPUModel");
    if (model.find("CPU Max") != std::string::npos || model.find("Xeon Phi") != std::string::npos)
      return true;
  }
  return false;
}

// Nodes that share one locality: Linux gives each CPU to one node, the one of lowest OS index
// (CPU-bearing nodes are numbered first), so the others own no CPU even though hwloc gives
// them the same cpuset. hwloc 2.2 exports of Xeon Max flat mode give the HBM nodes no subtype:
// a smaller memory-only node is HBM only on a processor that has HBM; otherwise it is CPU-less
// memory (a CXL expander that hwloc did not label), never counted as local to CPUs or devices.
void classify_memory_only_siblings(hwloc_topology_t t, std::vector<NumaNode>& nodes) {
  std::map<hwloc_obj_t, std::vector<hwloc_obj_t>> by_parent;
  hwloc_obj_t n = nullptr;
  while ((n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n)))
    by_parent[n->parent].push_back(n);
  for (auto& [parent, group] : by_parent) {
    if (group.size() < 2) continue;
    auto ddr = *std::min_element(group.begin(), group.end(),
                                 [](auto a, auto b) { return a->os_index < b->os_index; });
    for (auto o : group) {
      if (o == ddr) continue;
      for (auto& node : nodes) {
        if (node.os_index != o->os_index || node.kind != NumaKind::dram) continue;
        const std::string subtype = o->subtype ? o->subtype : "";
        const bool unlabelled = subtype.empty() || subtype == "SPM";
        const bool smaller = o->attr->numanode.local_memory < ddr->attr->numanode.local_memory;
        node.kind =
            unlabelled && smaller && package_has_hbm(t, o) ? NumaKind::hbm : NumaKind::cpuless;
      }
    }
  }
}

std::vector<unsigned> nodes_of(hwloc_const_nodeset_t nodeset) {
  return to_cpuset(nodeset).to_vector();
}

std::string osdev_type(hwloc_obj_osdev_type_t type) {
  switch (type) {
    case HWLOC_OBJ_OSDEV_BLOCK:
      return "block";
    case HWLOC_OBJ_OSDEV_GPU:
      return "gpu";
    case HWLOC_OBJ_OSDEV_NETWORK:
      return "network";
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
      return "openfabrics";
    case HWLOC_OBJ_OSDEV_DMA:
      return "dma";
    case HWLOC_OBJ_OSDEV_COPROC:
      return "coproc";
  }
  return "other";
}

PciAddress address_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  return PciAddress{a.domain, a.bus, a.dev, a.func};
}

// What a PCI function is to polyaccel: the classification rules of the foundation issue.
enum class DeviceRole { none, accelerator, nic, nvme };

DeviceRole classify(const PciDevice& d, Vendor& vendor) {
  const unsigned cls = d.class_id;
  const bool has_coproc = std::any_of(d.os_devices.begin(), d.os_devices.end(),
                                      [](const OsDevice& o) { return o.type == "coproc"; });
  vendor = Vendor::other;
  if ((cls >> 8) == 0x02) return DeviceRole::nic;
  if (cls == 0x0108) return DeviceRole::nvme;
  if (d.vendor_id == 0x10de && (cls == 0x0300 || cls == 0x0302)) {
    vendor = Vendor::nvidia;
    return DeviceRole::accelerator;
  }
  if (d.vendor_id == 0x1002 && (cls == 0x0300 || cls == 0x0302 || cls == 0x0380 || cls == 0x1200)) {
    vendor = Vendor::amd;
    return DeviceRole::accelerator;
  }
  if (d.vendor_id == 0x1da3 && (cls >> 8) != 0x06) {
    vendor = Vendor::intel_gaudi;
    return DeviceRole::accelerator;
  }
  // Other vendors' compute devices: processing accelerators, 3D controllers (Intel data center
  // GPUs), and co-processors that the OS shows as compute devices (NEC Vector Engines), not the
  // on-die Intel QAT/DLB co-processors that have no such device.
  if (cls == 0x1200 || cls == 0x0302 || cls == 0x0380) return DeviceRole::accelerator;
  if (cls == 0x0b40 && has_coproc) return DeviceRole::accelerator;
  return DeviceRole::none;
}

std::string nic_fabric(const PciDevice& d, const std::vector<std::string>& netdevs,
                       const std::vector<std::string>& rdma) {
  for (const auto& o : d.os_devices) {
    if (o.subtype == "Slingshot") return "slingshot";
  }
  // Cray/HPE Cassini: a Slingshot NIC whether or not hwloc named the subtype.
  if (d.vendor_id == 0x17db) return "slingshot";
  if (d.class_id == 0x0207) return "infiniband";
  if (d.class_id == 0x0208) return "omnipath";
  for (const auto& r : rdma) {
    if (r.rfind("hfi1_", 0) == 0) return "omnipath";
    if (r.rfind("efa", 0) == 0) return "efa";
  }
  // Amazon's Elastic Fabric Adapter names its RDMA device after the PCI slot (rdmapNsM).
  if (d.vendor_id == 0x1d0f && !rdma.empty()) return "efa";
  for (const auto& n : netdevs) {
    if (n.rfind("ib", 0) == 0) return "infiniband";
    if (n.rfind("hsn", 0) == 0) return "slingshot";
  }
  if (d.class_id == 0x0200) return "ethernet";
  return "";
}

// Number of logical GPUs the OS shows on one PCI function: the largest count of one
// vendor-backed OS device subtype (six RSMI devices on an MI300A in CPX mode).
unsigned count_partitions(const PciDevice& d) {
  std::map<std::string, unsigned> per_subtype;
  for (const auto& o : d.os_devices) {
    if ((o.type == "gpu" || o.type == "coproc") && !o.subtype.empty()) per_subtype[o.subtype]++;
  }
  unsigned n = 1;
  for (const auto& [s, c] : per_subtype)
    n = std::max(n, c);
  return n;
}

// NVLink count from hwloc's bandwidth in MB/s: 25 GB/s per link from NVLink 2 on, 20 GB/s for
// NVLink 1 (hwloc's NVML backend computes the matrix that way).
unsigned nvlinks_from_bandwidth(std::uint64_t mbps) {
  if (mbps == 0) return 0;
  if (mbps % 25000 == 0) return static_cast<unsigned>(mbps / 25000);
  if (mbps % 20000 == 0) return static_cast<unsigned>(mbps / 20000);
  return std::max<unsigned>(
      1, static_cast<unsigned>(std::lround(static_cast<double>(mbps) / 25000.0)));
}

struct Builder {
  hwloc_topology_t t;
  HostModel model;
  std::map<hwloc_obj_t, int> host_bridge_index;
  std::map<hwloc_obj_t, size_t> accelerator_of_pci;  // hwloc PCI object → index
  std::set<std::string> nvidia_driver_gpus;          // bus ids under /proc/driver/nvidia/gpus

  void cpus_and_memory() {
    hwloc_obj_t root = hwloc_get_root_obj(t);
    model.architecture = info(root, "Architecture");
    model.hostname = info(root, "HostName");
    model.pus = to_cpuset(hwloc_topology_get_topology_cpuset(t));

    hwloc_obj_t o = nullptr;
    while ((o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, o))) {
      Package p;
      p.os_index = o->os_index;
      p.model = info(o, "CPUModel");
      p.vendor = info(o, "CPUVendor");
      p.family = info_number(o, "CPUFamilyNumber");
      p.model_number = info_number(o, "CPUModelNumber");
      p.cpus = to_cpuset(o->cpuset);
      p.numa_nodes = nodes_of(o->nodeset);
      // With one core per die hwloc 2.9 may split a socket into Package objects that share an
      // OS index (0,0,1,1): one socket is one package, so they merge.
      auto same = std::find_if(model.packages.begin(), model.packages.end(),
                               [&](const Package& q) { return q.os_index == p.os_index; });
      if (same != model.packages.end() && o->os_index != HWLOC_UNKNOWN_INDEX) {
        same->cpus |= p.cpus;
        for (unsigned n : p.numa_nodes) {
          if (std::find(same->numa_nodes.begin(), same->numa_nodes.end(), n) ==
              same->numa_nodes.end())
            same->numa_nodes.push_back(n);
        }
        std::sort(same->numa_nodes.begin(), same->numa_nodes.end());
        continue;
      }
      model.packages.push_back(std::move(p));
    }

    std::uint64_t smallest_page = 0;
    while ((o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o))) {
      NumaNode n;
      n.os_index = o->os_index;
      n.memory_bytes = o->attr->numanode.local_memory;
      n.cpus = to_cpuset(o->cpuset);  // the locality; trimmed below for memory-only nodes
      n.subtype = o->subtype ? o->subtype : "";
      n.kind = numa_kind(o, n.subtype, !n.cpus.empty());
      const auto& na = o->attr->numanode;
      for (unsigned i = 0; i < na.page_types_len; ++i) {
        if (na.page_types[i].size == 0) continue;
        if (smallest_page == 0 || na.page_types[i].size < smallest_page)
          smallest_page = na.page_types[i].size;
      }
      for (unsigned i = 0; i < na.page_types_len; ++i) {
        n.hugepages.push_back(
            Hugepages{na.page_types[i].size, na.page_types[i].count, std::nullopt});
      }
      model.numa_nodes.push_back(std::move(n));
    }
    classify_memory_only_siblings(t, model.numa_nodes);
    for (auto& n : model.numa_nodes) {
      n.local_cpus = n.cpus;
      // Memory-only nodes own no CPU, whatever locality hwloc gives them.
      if (n.kind != NumaKind::dram) n.cpus = CpuSet{};
    }
    model.page_size = smallest_page;
    // Hugepages are the sizes above the base page; hwloc lists the base page too.
    for (auto& n : model.numa_nodes) {
      std::erase_if(n.hugepages,
                    [&](const Hugepages& h) { return h.size_bytes <= model.page_size; });
      std::sort(n.hugepages.begin(), n.hugepages.end(),
                [](const Hugepages& a, const Hugepages& b) { return a.size_bytes < b.size_bytes; });
    }
    std::sort(model.numa_nodes.begin(), model.numa_nodes.end(),
              [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });

    while ((o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_CORE, o))) {
      Core c;
      c.os_index = o->os_index;
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, o);
      c.package = pkg ? pkg->os_index : 0;
      c.pus = to_cpuset(o->cpuset);
      if (hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_L3CACHE, o))
        c.l3_cache = l3->logical_index;
      if (!c.pus.empty()) model.cores.push_back(std::move(c));
    }
    if (model.cores.empty()) {  // a topology without Core objects: each PU is its own core
      while ((o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, o))) {
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, o);
        Core c{o->os_index, pkg ? pkg->os_index : 0, CpuSet{o->os_index}, std::nullopt};
        if (hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_L3CACHE, o))
          c.l3_cache = l3->logical_index;
        model.cores.push_back(std::move(c));
      }
    }
  }

  void numa_distances() {
    unsigned nr = 1;
    hwloc_distances_s* d = nullptr;
    if (hwloc_distances_get_by_name(t, "NUMALatency", &nr, &d, 0) != 0 || nr == 0) return;
    DistanceMatrix m;
    m.name = "NUMALatency";
    for (unsigned i = 0; i < d->nbobjs; ++i)
      m.os_index.push_back(d->objs[i]->os_index);
    m.values.assign(d->nbobjs, std::vector<std::uint64_t>(d->nbobjs, 0));
    for (unsigned i = 0; i < d->nbobjs; ++i) {
      for (unsigned j = 0; j < d->nbobjs; ++j)
        m.values[i][j] = d->values[i * d->nbobjs + j];
    }
    hwloc_distances_release(t, d);
    model.numa_distances = std::move(m);
  }

  int host_bridge(hwloc_obj_t hb) {
    auto it = host_bridge_index.find(hb);
    if (it != host_bridge_index.end()) return it->second;
    HostBridge b;
    b.domain = hb->attr->bridge.downstream.pci.domain;
    b.bus_first = hb->attr->bridge.downstream.pci.secondary_bus;
    b.bus_last = hb->attr->bridge.downstream.pci.subordinate_bus;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, hb);
    if (anc) {
      b.local_cpus = to_cpuset(anc->cpuset);
      b.numa_nodes = nodes_of(anc->nodeset);
    }
    int idx = static_cast<int>(model.host_bridges.size());
    model.host_bridges.push_back(std::move(b));
    host_bridge_index[hb] = idx;
    return idx;
  }

  PciDevice pci_device(hwloc_obj_t o) {
    PciDevice d;
    const auto& a = o->attr->pcidev;
    d.address = address_of(a);
    d.vendor_id = a.vendor_id;
    // A gathered tree may keep only `class`; the NVIDIA driver's own list still names its GPUs.
    if (d.vendor_id == 0 && nvidia_driver_gpus.count(d.address.to_string())) d.vendor_id = 0x10de;
    d.device_id = a.device_id;
    d.subsystem_vendor_id = a.subvendor_id;
    d.subsystem_device_id = a.subdevice_id;
    d.class_id = a.class_id;
    d.revision = a.revision;
    d.link.bandwidth_gbps = static_cast<double>(a.linkspeed);
    d.vendor_name = info(o, "PCIVendor");
    d.device_name = info(o, "PCIDevice");

    // Bridges from the device up to the host bridge, then read top down.
    std::vector<hwloc_obj_t> bridges;
    hwloc_obj_t p = o->parent;
    while (p && p->type == HWLOC_OBJ_BRIDGE) {
      if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
        d.host_bridge = host_bridge(p);
        break;
      }
      bridges.push_back(p);
      p = p->parent;
    }
    std::reverse(bridges.begin(), bridges.end());
    // The top bridge is the root port (also when hwloc gave no host bridge above it).
    if (!bridges.empty()) {
      d.root_port = address_of(bridges.front()->attr->bridge.upstream.pci);
      bridges.erase(bridges.begin());
    }
    // Below the root port, bridges come in pairs: a switch's upstream port and one of its
    // downstream ports. A lone last bridge counts as a switch of its own.
    for (size_t i = 0; i < bridges.size(); i += 2) {
      const auto& up = bridges[i]->attr->bridge.upstream.pci;
      d.switches.push_back(
          PciSwitch{address_of(up), up.vendor_id, up.device_id, up.subvendor_id, up.subdevice_id});
    }

    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o);
    if (anc) {
      d.local_cpus = to_cpuset(anc->cpuset);
      d.numa_nodes = nodes_of(anc->nodeset);
    }
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
      d.os_devices.push_back(OsDevice{c->name ? c->name : "", osdev_type(c->attr->osdev.type),
                                      c->subtype ? c->subtype : "", info(c, "NodeGUID")});
    }
    return d;
  }

  std::string gpu_model(hwloc_obj_t o) {
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      std::string m = info(c, "GPUModel");
      if (!m.empty()) return m;
    }
    return {};
  }

  void pci_devices() {
    hwloc_obj_t o = nullptr;
    while ((o = hwloc_get_next_pcidev(t, o))) {
      PciDevice d = pci_device(o);
      Vendor vendor;
      switch (classify(d, vendor)) {
        case DeviceRole::accelerator: {
          Accelerator a;
          a.vendor = vendor;
          a.name = gpu_model(o);
          a.partitions = count_partitions(d);
          a.pci = std::move(d);
          accelerator_of_pci[o] = model.accelerators.size();
          model.accelerators.push_back(std::move(a));
          break;
        }
        case DeviceRole::nic: {
          Nic n;
          for (const auto& od : d.os_devices) {
            if (od.type == "network") n.netdevs.push_back(od.name);
            if (od.type == "openfabrics") n.rdma_devices.push_back(od.name);
          }
          n.fabric = nic_fabric(d, n.netdevs, n.rdma_devices);
          n.pci = std::move(d);
          model.nics.push_back(std::move(n));
          break;
        }
        case DeviceRole::nvme: {
          NvmeDevice n;
          for (const auto& od : d.os_devices) {
            if (od.type == "block") n.block_devices.push_back(od.name);
          }
          n.pci = std::move(d);
          model.nvme.push_back(std::move(n));
          break;
        }
        case DeviceRole::none:
          break;
      }
    }
  }

  // NVLinkBandwidth / XGMIHops / XGMIBandwidth matrices are over OS devices (nvmlN, rsmiN);
  // their PCI parents are our accelerators.
  void peer_links() {
    for (const char* name : {"NVLinkBandwidth", "XGMIHops", "XGMIBandwidth"}) {
      unsigned nr = 1;
      hwloc_distances_s* d = nullptr;
      if (hwloc_distances_get_by_name(t, name, &nr, &d, 0) != 0 || nr == 0) continue;
      const bool nvlink = std::string(name) == "NVLinkBandwidth";
      const bool hops = std::string(name) == "XGMIHops";
      for (unsigned i = 0; i < d->nbobjs; ++i) {
        for (unsigned j = 0; j < d->nbobjs; ++j) {
          auto ai = accelerator_index(d->objs[i]);
          auto aj = accelerator_index(d->objs[j]);
          if (!ai || !aj || *ai == *aj) continue;
          std::uint64_t v = d->values[i * d->nbobjs + j];
          if (v == 0 || (hops && v != 1)) continue;
          Link link{nvlink ? LinkLevel::nvlink : LinkLevel::xgmi,
                    nvlink ? nvlinks_from_bandwidth(v) : 1};
          add_peer(*ai, *aj, link);
        }
      }
      hwloc_distances_release(t, d);
    }
  }

  std::optional<size_t> accelerator_index(hwloc_obj_t osdev) {
    hwloc_obj_t p = osdev;
    while (p && p->type != HWLOC_OBJ_PCI_DEVICE)
      p = p->parent;
    if (!p) return std::nullopt;
    auto it = accelerator_of_pci.find(p);
    if (it == accelerator_of_pci.end()) return std::nullopt;
    return it->second;
  }

  void add_peer(size_t i, size_t j, Link link) {
    auto& peers = pending_peers[{i, j}];
    if (peers.level == LinkLevel::sys || link.count > peers.count) peers = link;
  }

  std::map<std::pair<size_t, size_t>, Link> pending_peers;
};

// hwloc's topology of the source the options name, loaded as discovery reads it.
Status load_topology(const DiscoverOptions& options, Topology& topo) {
  ScopedEnv env;
  // hwloc's own warnings (out-of-order objects, bad distances) are multi-line banners on
  // stderr; what matters to us comes back as a load failure, which we report in one line.
  env.set("HWLOC_HIDE_ERRORS", "2");
  // The same hwloc whatever plugins the host has installed (libhwloc-plugins comes with Open MPI):
  // its own XML reader, which check_xml_file's pre-check is written for (libxml2's refuses what
  // it accepts, a non-UTF-8 HostName); PCI from sysfs by its Linux component, as without the
  // plugins (the libpciaccess one leaks every device name it reads); and no component that
  // would start a GPU or display library in our process (OpenCL's ICDs initialise the CUDA
  // driver; GL queries X displays). Read once per process, at the first load.
  env.set("HWLOC_LIBXML_IMPORT", "0");
  env.set("HWLOC_PLUGINS_BLACKLIST",
          "hwloc_xml_libxml,hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_cuda,hwloc_nvml,hwloc_rsmi,"
          "hwloc_levelzero");
  std::string xml_text;
  if (!options.topology_xml.empty()) {
    auto text = check_xml_file(options.topology_xml);
    if (!text) return text.error();
    xml_text = std::move(*text);
  } else if (!options.fsroot.empty()) {
    if (auto st = check_fsroot(options.fsroot); !st) return st.error();
    env.set("HWLOC_FSROOT", options.fsroot);
    // Only the Linux component: the x86 one would read this machine's CPUID instead.
    env.set("HWLOC_COMPONENTS", "linux,stop");
  }
  if (options.topology_xml.empty()) {
    // GPU memory of POWER9/Grace machines is a NUMA node that placement must know about.
    env.set("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "1");
  }

  if (hwloc_topology_init(&topo.t) != 0) {
    return Error{ErrorCode::internal, "hwloc", "hwloc_topology_init failed", {}};
  }
  hwloc_topology_set_io_types_filter(topo.t, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_flags(topo.t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  if (!options.topology_xml.empty()) {
    // Size with the terminating NUL, as hwloc's XML buffer reader wants it.
    if (hwloc_topology_set_xmlbuffer(topo.t, xml_text.c_str(),
                                     static_cast<int>(xml_text.size() + 1)) != 0) {
      return bad_input(options.topology_xml, "hwloc cannot use it as an XML topology");
    }
  }
  const std::string input = !options.topology_xml.empty() ? options.topology_xml
                            : !options.fsroot.empty()     ? options.fsroot
                                                          : "live host";
  if (hwloc_topology_load(topo.t) != 0)
    return bad_input(input, "hwloc cannot load it (malformed or truncated topology)");
  if (hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_PU) <= 0)
    return bad_input(input, "holds no CPU (PU) at all");
  // A gathered tree is not pre-checked: bound the CPU and node numbers hwloc read from it.
  hwloc_obj_t root = hwloc_get_root_obj(topo.t);
  int last_cpu = root->complete_cpuset ? hwloc_bitmap_last(root->complete_cpuset) : -1;
  int last_node = root->complete_nodeset ? hwloc_bitmap_last(root->complete_nodeset) : -1;
  if (root->complete_cpuset && hwloc_bitmap_weight(root->complete_cpuset) < 0)
    return bad_input(input, "has an infinite CPU set");
  if (last_cpu > static_cast<int>(kMaxCpuIndex))
    return bad_input(input, "names CPU " + std::to_string(last_cpu) + ", beyond CPU " +
                                std::to_string(kMaxCpuIndex));
  if (last_node > static_cast<int>(kMaxNodeIndex))
    return bad_input(input, "names NUMA node " + std::to_string(last_node) + ", beyond node " +
                                std::to_string(kMaxNodeIndex));
  return Ok{};
}

}  // namespace

Result<std::string> export_hwloc_xml(const DiscoverOptions& options) {
  Topology topo;
  if (auto st = load_topology(options, topo); !st) return st.error();
  char* buffer = nullptr;
  int length = 0;
  if (hwloc_topology_export_xmlbuffer(topo.t, &buffer, &length, 0) != 0 || !buffer) {
    return Error{ErrorCode::internal, "hwloc", "hwloc_topology_export_xmlbuffer failed", {}};
  }
  std::string xml(buffer, length > 0 ? static_cast<size_t>(length - 1) : 0);  // without its NUL
  hwloc_free_xmlbuffer(topo.t, buffer);
  return xml;
}

Result<HostModel> load_from_hwloc(const DiscoverOptions& options) {
  Topology topo;
  if (auto st = load_topology(options, topo); !st) return st.error();

  Builder b{topo.t, {}, {}, {}, {}, {}};
  if (options.topology_xml.empty()) {
    std::error_code ec;
    fs::path gpus =
        fs::path(options.fsroot.empty() ? "/" : options.fsroot) / "proc/driver/nvidia/gpus";
    for (const auto& e : fs::directory_iterator(gpus, ec)) {
      if (auto addr = PciAddress::parse(e.path().filename().string())) {
        b.nvidia_driver_gpus.insert(addr->to_string());
      }
    }
  }
  b.model.source = !options.topology_xml.empty() ? "xml:" + options.topology_xml
                   : !options.fsroot.empty()     ? "fsroot:" + options.fsroot
                                                 : "live";
  b.cpus_and_memory();
  b.numa_distances();
  b.pci_devices();
  b.peer_links();
  if (options.topology_xml.empty() && options.fsroot.empty()) {
    b.model.page_size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0 && b.model.hostname.empty())
      b.model.hostname = host;
  }
  for (const auto& [ij, link] : b.pending_peers) {
    auto& from = b.model.accelerators[ij.first];
    from.peer_links.push_back(PeerLink{b.model.accelerators[ij.second].pci.address, link});
  }
  return std::move(b.model);
}

}  // namespace polyaccel::detail
