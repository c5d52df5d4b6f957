#include "place/libvirt_domains.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include "core/file_io.h"
#include "core/number.h"
#include "core/pci_address.h"
#include "core/strings.h"
#include "place/xml_tree.h"

namespace polyaccel::place {

namespace {

// Beyond these a domain is not one libvirt would start (its limits are lower): refused, so
// that a hostile file cannot make us count or allocate without bound.
constexpr std::uint64_t kMaxVcpus = 16384;
constexpr unsigned kMaxHostNode = 4095;  // Linux's MAX_NUMNODES
constexpr unsigned kMaxGuestCells = 256;
constexpr std::uint64_t kMaxMemoryBytes = std::uint64_t{1} << 50;  // 1 PiB
constexpr std::uint64_t kMaxPageBytes = std::uint64_t{16} << 30;   // 16 GiB (ppc64)
constexpr unsigned kMaxPus = 1u << 16;                             // PU indexes

using xml::attr;
using xml::child;
using xml::children;
using xml::has_attr;
using xml::is;
using xml::parse_untrusted;
using xml::text_of;

// What one domain's reading needs: the file's name for errors.
struct DomainReader {
  std::string input;

  Error error(const std::string& problem) const { return bad_input(input, problem); }

  // libvirt's cpuset syntax: "0-3,8,^2" (a ^ takes an index out), every index below `limit`.
  // Each bound is checked before a range is filled, so that a hostile list costs at most `limit`
  // steps per item.
  Result<CpuSet> cpuset(const std::string& text, const std::string& what, unsigned limit) const {
    CpuSet in, out;
    bool any = false;
    auto bad = [&] {
      return error(what + " " + quote_input(text) + " is not a list of indexes below " +
                   std::to_string(limit));
    };
    for (const auto& raw : split(text, ',')) {
      std::string_view item = raw;
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t'))
        item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t'))
        item.remove_suffix(1);
      const bool exclude = !item.empty() && item.front() == '^';
      if (exclude) item.remove_prefix(1);
      const size_t dash = exclude ? std::string_view::npos : item.find('-');
      auto first = parse_unsigned(item.substr(0, dash), what, 0, limit - 1);
      auto last = dash == std::string_view::npos
                      ? first
                      : parse_unsigned(item.substr(dash + 1), what, 0, limit - 1);
      if (!first || !last || *first > *last) return bad();
      for (auto i = *first; i <= *last; ++i)
        (exclude ? out : in).set(static_cast<unsigned>(i));
      any = any || !exclude;
    }
    if (!any) return bad();
    return in - out;
  }

  // A size in libvirt's units (virScaleInteger): b or bytes; k, M, G, T, P, E (any case) alone
  // or with "iB" for powers of 1024, with "B" for powers of 1000; KiB when none. At most `max`.
  Result<std::uint64_t> size(const std::string& value, const std::string& unit,
                             const std::string& what, std::uint64_t max) const {
    auto scale = [](const std::string& u) -> std::optional<std::uint64_t> {
      if (u.empty()) return 1024;
      if (u == "b" || u == "bytes") return 1;
      static const std::string kPrefixes = "kmgtpe";
      const size_t exponent =
          kPrefixes.find(static_cast<char>(std::tolower(static_cast<unsigned char>(u.front())))) +
          1;
      if (exponent == 0) return std::nullopt;
      const std::string rest = u.substr(1);
      std::uint64_t base = rest.empty() || rest == "iB" ? 1024 : rest == "B" ? 1000 : 0;
      if (base == 0) return std::nullopt;
      std::uint64_t out = 1;
      for (size_t i = 0; i < exponent; ++i)
        out *= base;
      return out;
    };
    auto u = scale(unit);
    if (!u) return error(what + ": unit " + quote_input(unit) + " is not libvirt's");
    auto v = parse_unsigned(value, what, 0, max / *u);
    if (!v)
      return error(what + " " + quote_input(value) + " " + printable(unit) +
                   " is not a size up to " + std::to_string(max) + " bytes");
    return *v * *u;
  }

  Result<unsigned> index(const std::string& text, const std::string& what,
                         std::uint64_t limit) const {
    auto v = parse_unsigned(text, what, 0, limit - 1);
    if (!v)
      return error(what + " " + quote_input(text) + " is not a number below " +
                   std::to_string(limit));
    return static_cast<unsigned>(*v);
  }

  // A PCI address element: domain, bus, slot and function in hex (0x..) or decimal, as libvirt
  // accepts them, each within PCI's range.
  Result<PciAddress> pci_address(xmlNode* a, const std::string& what) const {
    auto field = [&](const char* name, std::uint64_t max) -> Result<unsigned> {
      const std::string t = attr(a, name);
      if (t.empty()) {
        if (std::string(name) == "domain" || std::string(name) == "function") return 0u;
        return error(what + " has no " + name);
      }
      const bool hex = t.starts_with("0x") || t.starts_with("0X");
      // A leading 0 is octal to libvirt and decimal to a reader: neither is assumed.
      if (!hex && t.size() > 1 && t.front() == '0')
        return error(what + ": " + name + " " + quote_input(t) + " has a leading 0");
      auto v = hex ? parse_hex(t, name, max) : parse_unsigned(t, name, 0, max);
      if (!v)
        return error(what + ": " + name + " " + quote_input(t) + " is beyond " +
                     std::to_string(max));
      return static_cast<unsigned>(*v);
    };
    auto d = field("domain", 0xffff), b = field("bus", 0xff), s = field("slot", 0x1f),
         f = field("function", 7);
    for (const auto* r : {&d, &b, &s, &f}) {
      if (!*r) return r->error();
    }
    return PciAddress{*d, static_cast<std::uint8_t>(*b), static_cast<std::uint8_t>(*s),
                      static_cast<std::uint8_t>(*f)};
  }
};

struct GuestCellXml {
  unsigned id = 0;
  CpuSet vcpus;
  std::uint64_t memory_bytes = 0;
};

Result<DomainPlacement> read_domain(const DomainReader& r, xmlNode* domain,
                                    const DomainReadOptions& options) {
  DomainPlacement out;
  Placement& p = out.placement;
  p.owner = kLibvirtOwner;
  const std::string name = text_of(child(domain, "name"));
  if (name.empty()) return r.error("the domain has no <name>");
  p.name = kLibvirtNamePrefix + name;
  // What check_placement_name asks of our own names, that it prints on one line as given.
  if (p.name.size() > 253 || !valid_utf8(name) ||
      std::any_of(name.begin(), name.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    return r.error("domain name " + quote_input(name) +
                   " is longer than 245 bytes, not UTF-8 or holds a control character");

  xmlNode* vcpu = child(domain, "vcpu");
  if (!vcpu) return r.error("domain " + printable(name) + " has no <vcpu>");
  auto vcpus = parse_unsigned(text_of(vcpu), "<vcpu>", 1, kMaxVcpus);
  if (!vcpus)
    return r.error("<vcpu> " + quote_input(text_of(vcpu)) + " is not a count from 1 to " +
                   std::to_string(kMaxVcpus));
  p.vcpus = static_cast<unsigned>(*vcpus);
  // Where vCPUs without a <vcpupin> float: <vcpu cpuset>, else anywhere (empty).
  CpuSet default_affinity;
  if (has_attr(vcpu, "cpuset")) {
    auto s = r.cpuset(attr(vcpu, "cpuset"), "<vcpu cpuset>", kMaxPus);
    if (!s) return s.error();
    default_affinity = *s;
  }
  xmlNode* memory = child(domain, "memory");
  if (memory) {
    auto m = r.size(text_of(memory), attr(memory, "unit"), "<memory>", kMaxMemoryBytes);
    if (!m) return m.error();
    p.memory_bytes = *m;
  }

  // <cputune>: each vCPU's PUs; one PU is a pinned vCPU (Nova's dedicated), several a vCPU
  // floating over them (Nova's shared set, or a node's PUs).
  std::map<unsigned, CpuSet> pins;
  xmlNode* cputune = child(domain, "cputune");
  for (xmlNode* pin : children(cputune, "vcpupin")) {
    auto v = r.index(attr(pin, "vcpu"), "<vcpupin vcpu>", p.vcpus);
    if (!v) return v.error();
    auto s = r.cpuset(attr(pin, "cpuset"), "<vcpupin cpuset>", kMaxPus);
    if (!s) return s.error();
    if (!pins.emplace(*v, *s).second)
      return r.error("<vcpupin> names vCPU " + std::to_string(*v) + " twice");
  }
  if (xmlNode* e = child(cputune, "emulatorpin")) {
    auto s = r.cpuset(attr(e, "cpuset"), "<emulatorpin cpuset>", kMaxPus);
    if (!s) return s.error();
    p.emulator_pus = *s;
  }
  auto affinity = [&](unsigned v) {
    auto it = pins.find(v);
    return it == pins.end() ? default_affinity : it->second;
  };
  unsigned pinned = 0;
  for (unsigned v = 0; v < p.vcpus; ++v) {
    CpuSet a = affinity(v);
    if (a.count() == 1) {
      p.held_pus |= a;
      ++pinned;
    }
  }
  p.cpu_policy = pinned == p.vcpus ? CpuPolicy::dedicated
                 : pinned == 0     ? CpuPolicy::shared
                                   : CpuPolicy::mixed;
  // An emulator pinned to one PU of a guest whose vCPUs are all pinned is Nova's
  // hw:emulator_threads_policy=isolate: that PU is the guest's alone. (A one-PU cpu_shared_set
  // reads the same: counted as held, the safe side.)
  if (p.cpu_policy == CpuPolicy::dedicated && p.emulator_pus.count() == 1)
    p.held_pus |= p.emulator_pus;

  // Guest NUMA cells (<cpu><numa><cell>) and the host node each is bound to (<numatune>).
  std::vector<GuestCellXml> cells;
  CpuSet cell_vcpus;
  for (xmlNode* c : children(child(child(domain, "cpu"), "numa"), "cell")) {
    if (cells.size() == kMaxGuestCells)
      return r.error("more than " + std::to_string(kMaxGuestCells) + " guest NUMA cells");
    GuestCellXml g;
    auto id = has_attr(c, "id") ? r.index(attr(c, "id"), "<cell id>", kMaxGuestCells)
                                : Result<unsigned>(static_cast<unsigned>(cells.size()));
    if (!id) return id.error();
    g.id = *id;
    for (const auto& other : cells) {
      if (other.id == g.id) return r.error("guest cell " + std::to_string(g.id) + " is twice");
    }
    auto cpus = r.cpuset(attr(c, "cpus"), "<cell cpus>", p.vcpus);
    if (!cpus) return cpus.error();
    if (cell_vcpus.intersects(*cpus))
      return r.error("vCPUs " + (cell_vcpus & *cpus).to_list() + " are in two guest cells");
    cell_vcpus |= *cpus;
    g.vcpus = *cpus;
    auto m = r.size(attr(c, "memory"), attr(c, "unit"), "<cell memory>", kMaxMemoryBytes);
    if (!m) return m.error();
    g.memory_bytes = *m;
    cells.push_back(g);
  }
  std::optional<CpuSet> memory_nodes;  // <numatune><memory nodeset>
  std::map<unsigned, CpuSet> memnode;  // guest cell -> host nodes
  xmlNode* numatune = child(domain, "numatune");
  if (xmlNode* m = child(numatune, "memory"); m && has_attr(m, "nodeset")) {
    auto s = r.cpuset(attr(m, "nodeset"), "<numatune><memory nodeset>", kMaxHostNode + 1);
    if (!s) return s.error();
    memory_nodes = *s;
  }
  for (xmlNode* m : children(numatune, "memnode")) {
    auto id = r.index(attr(m, "cellid"), "<memnode cellid>", kMaxGuestCells);
    if (!id) return id.error();
    auto s = r.cpuset(attr(m, "nodeset"), "<memnode nodeset>", kMaxHostNode + 1);
    if (!s) return s.error();
    if (!memnode.emplace(*id, *s).second)
      return r.error("<memnode> names guest cell " + std::to_string(*id) + " twice");
  }
  // A guest without cells whose memory is bound to one host node: one cell there (numactl-like
  // pinning by hand, or an unpinned guest with <numatune>).
  if (cells.empty() && memory_nodes && memory_nodes->count() == 1) {
    GuestCellXml g;
    for (unsigned v = 0; v < p.vcpus; ++v)
      g.vcpus.set(v);
    g.memory_bytes = p.memory_bytes;
    cells.push_back(g);
  }

  // Huge pages: <page size unit nodeset> per guest cells; a <page> without nodeset, or an empty
  // <hugepages/>, for the rest.
  std::map<unsigned, std::uint64_t> page_of_cell;
  std::optional<std::uint64_t> page_for_rest;
  if (xmlNode* huge = child(child(domain, "memoryBacking"), "hugepages")) {
    auto pages = children(huge, "page");
    if (pages.empty()) page_for_rest = options.default_huge_page_bytes;
    for (xmlNode* page : pages) {
      auto bytes = r.size(attr(page, "size"), attr(page, "unit"), "<page size>", kMaxPageBytes);
      if (!bytes) return bytes.error();
      if (*bytes < 4096 || (*bytes & (*bytes - 1)) != 0)
        return r.error("<page size> " + std::to_string(*bytes) + " bytes is not a page size");
      if (!has_attr(page, "nodeset")) {
        page_for_rest = *bytes;
        continue;
      }
      auto set = r.cpuset(attr(page, "nodeset"), "<page nodeset>", kMaxGuestCells);
      if (!set) return set.error();
      for (unsigned id : set->to_vector())
        page_of_cell[id] = *bytes;
    }
  }

  // Each cell on the one host node its memory is bound to. A cell bound to several nodes, or
  // to none, cannot be counted on one: the guest is then counted host-wide (its held PUs
  // still are).
  bool on_nodes = !cells.empty();
  for (const auto& g : cells) {
    auto it = memnode.find(g.id);
    const CpuSet* nodes = it != memnode.end() ? &it->second
                          : memory_nodes      ? &*memory_nodes
                                              : nullptr;
    if (!nodes || nodes->count() != 1) {
      on_nodes = false;
      continue;
    }
    CellPlacement c;
    c.guest_cell = g.id;
    c.host_numa_node = *nodes->first();
    c.memory_bytes = g.memory_bytes;
    auto page = page_of_cell.find(g.id);
    c.page_size_bytes = page != page_of_cell.end() ? page->second : page_for_rest.value_or(0);
    for (unsigned v : g.vcpus.to_vector()) {
      c.vcpus.push_back(v);
      CpuSet a = affinity(v);
      if (a.count() == 1) {
        c.pinning.emplace_back(v, *a.first());
      } else {
        c.shared_vcpus.push_back(v);
        c.shared_pus |= a;
      }
    }
    p.cells.push_back(std::move(c));
  }
  if (!on_nodes) p.cells.clear();

  // Passed-through PCI functions: <hostdev type='pci'> and Nova's SR-IOV ports
  // (<interface type='hostdev'>).
  xmlNode* devices = child(domain, "devices");
  std::set<std::string> seen;
  auto add_device = [&](xmlNode* source, const char* what) -> Status {
    xmlNode* a = child(source, "address");
    if (!a) return r.error(std::string(what) + " has no <source><address>");
    auto address = r.pci_address(a, what);
    if (!address) return address.error();
    DevicePlacement d;
    d.pci_bus_id = address->to_string();
    d.alias = "libvirt";
    if (seen.insert(d.pci_bus_id).second) p.devices.push_back(d);
    return Ok{};
  };
  for (xmlNode* h : children(devices, "hostdev")) {
    if (attr(h, "type") != "pci") continue;
    if (auto s = add_device(child(h, "source"), "<hostdev type='pci'>"); !s) return s.error();
  }
  for (xmlNode* i : children(devices, "interface")) {
    if (attr(i, "type") != "hostdev") continue;
    if (auto s = add_device(child(i, "source"), "<interface type='hostdev'>"); !s) return s.error();
  }
  return out;
}

}  // namespace

Result<DomainPlacement> domain_placement(const std::string& input, const std::string& xml,
                                         const DomainReadOptions& options) {
  DomainReader r{input};
  if (xml.size() > kMaxDomainXmlBytes || xml.size() > static_cast<size_t>(INT_MAX))
    return r.error("is larger than " + std::to_string(kMaxDomainXmlBytes) + " bytes");
  auto doc = parse_untrusted(xml, input);
  if (!doc) return r.error("is not well-formed XML");
  // libvirt writes no DTD; one in the file could only carry entities to expand.
  if (doc->intSubset || doc->extSubset) return r.error("has a DTD, which libvirt never writes");
  xmlNode* root = xmlDocGetRootElement(doc.get());
  DomainPlacement out;
  xmlNode* domain = root;
  std::string state;
  if (is(root, "domstatus")) {
    state = attr(root, "state");
    domain = child(root, "domain");
    if (!domain) return r.error("is a libvirt status file without its <domain>");
  } else if (!is(root, "domain")) {
    return r.error("is not a libvirt domain (no <domstatus> or <domain>)");
  }
  auto read = read_domain(r, domain, options);
  if (!read) return read.error();
  read->status_xml = is(root, "domstatus");
  // A status file outlives its QEMU only until libvirtd notices; "shutoff" holds nothing.
  read->running = state != "shutoff";
  return read;
}

Result<std::vector<Placement>> read_running_domains(const std::filesystem::path& dir,
                                                    const DomainReadOptions& options) {
  namespace fs = std::filesystem;
  const std::string remedy =
      "run as root (libvirt's status files are root's), or pass --libvirt-domains none to count "
      "only polyaccel's allocation state";
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      return Error{ErrorCode::io, dir.string(), "cannot read: " + ec.message(), remedy};
    return std::vector<Placement>{};  // no libvirt on this host
  }
  if (!fs::is_directory(st))
    return bad_input(dir.string(), "is not a directory (libvirt's status directory)");
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec);
  if (ec) return Error{ErrorCode::io, dir.string(), "cannot list: " + ec.message(), remedy};
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return Error{ErrorCode::io, dir.string(), "cannot list: " + ec.message(), remedy};
    // libvirt keeps <name>.pid, per-domain directories and others beside the status files.
    if (it->path().extension() != ".xml") continue;
    if (files.size() == kMaxLibvirtDomains)
      return bad_input(dir.string(),
                       "holds more than " + std::to_string(kMaxLibvirtDomains) + " status files");
    files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Placement> out;
  std::set<std::string> names;
  for (const auto& f : files) {
    auto text = read_input_file(f, kMaxDomainXmlBytes, "libvirt status XML");
    if (!text) {
      Error e = text.error();
      if (e.remedy.empty()) e.remedy = remedy;
      return e;
    }
    auto d = domain_placement(f.string(), *text, options);
    if (!d) return d.error();
    if (!d->status_xml)
      return bad_input(f.string(),
                       "is a domain definition, not libvirt's status of a running domain "
                       "(<domstatus>): a definition says nothing of whether the guest runs",
                       "point --libvirt-domains at libvirt's status directory, /run/libvirt/qemu");
    if (!d->running) continue;
    if (!names.insert(d->placement.name).second)
      return bad_input(f.string(), "holds domain " + quote_input(d->placement.name) +
                                       ", which another status file holds");
    out.push_back(std::move(d->placement));
  }
  return out;
}

}  // namespace polyaccel::place
