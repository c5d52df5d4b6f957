#include "discover/tuning.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/byte_size.h"
#include "core/file_io.h"
#include "core/number.h"
#include "discover/hwloc_source.h"

namespace polyaccel {

namespace {

namespace fs = std::filesystem;

constexpr size_t kConfigSpaceBase = 256;  // where the PCIe extended capabilities start
constexpr std::uint16_t kAcsCapabilityId = 0x000D;

class Reader {
 public:
  Reader(const std::string& root, TuningFacts& facts) : root_(root), facts_(facts) {}

  fs::path path(const std::string& relative) const { return root_ / relative; }
  bool exists(const std::string& relative) const {
    std::error_code ec;
    return fs::exists(path(relative), ec);
  }
  // The text of a file that should be there; a failure is recorded as a problem.
  std::optional<std::string> text(const std::string& relative) {
    auto t = read_text_file(path(relative));
    if (!t) problem(relative, "cannot be read");
    return t;
  }
  // The same, for a file whose absence is normal (a module not loaded, no swap configured).
  std::optional<std::string> optional_text(const std::string& relative) const {
    return read_text_file(path(relative));
  }
  void problem(const std::string& relative, const std::string& what) {
    facts_.problems.push_back({relative, what});
  }
  std::vector<std::string> entries(const std::string& relative) const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(path(relative), ec))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path root_;
  TuningFacts& facts_;
};

// Blanks, and the NUL some kernels print for an empty CPU mask (nohz_full reads "\0\n").
std::string trim(const std::string& s) {
  static const std::string blanks(" \t\r\n\0", 5);
  size_t b = s.find_first_not_of(blanks);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(blanks) - b + 1);
}

// A whole number as the kernel writes it, blanks trimmed, within [min, max]: a value beyond is
// no reading (the error says why), never wrapped into the narrower field it is kept in.
template <class T>
Result<T> whole(const std::string& text, const std::string& what,
                T min = std::numeric_limits<T>::min(), T max = std::numeric_limits<T>::max()) {
  return parse_integer<T>(trim(text), what, min, max);
}

void read_kernel(Reader& r, TuningFacts& f) {
  if (auto cmdline = r.text("proc/cmdline")) {
    f.kernel_args = parse_kernel_cmdline(*cmdline);
    f.kernel_cmdline_known = true;
  }
  if (auto rel = r.optional_text("proc/sys/kernel/osrelease")) {
    f.kernel_release = trim(*rel);
  } else if (auto version = r.optional_text("proc/version")) {
    // "Linux version 3.10.0-1160.15.2.el7.x86_64 (...)"
    std::istringstream in(*version);
    std::string linux_word, version_word, release;
    in >> linux_word >> version_word >> release;
    f.kernel_release = release;
  }
  if (auto cpuinfo = r.optional_text("proc/cpuinfo")) {
    std::istringstream in(*cpuinfo);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("vendor_id", 0) != 0) continue;
      f.cpu_vendor = trim(line.substr(line.find(':') + 1));
      break;
    }
  }
  if (r.exists("proc/sys/kernel/numa_balancing")) {
    const std::string rel = "proc/sys/kernel/numa_balancing";
    if (auto t = r.text(rel)) {
      auto v = whole<int>(*t, rel);
      if (v) {
        f.numa_balancing = *v;
      } else {
        r.problem(rel, v.error().problem);
      }
    }
  }
}

void read_cpus(Reader& r, TuningFacts& f) {
  const std::string cpu_dir = "sys/devices/system/cpu";
  for (const auto& name : r.entries(cpu_dir)) {
    if (name.size() < 4 || name.rfind("cpu", 0) != 0) continue;
    auto index = whole<unsigned>(name.substr(3), name, 0, detail::kMaxCpuIndex);
    if (!index) continue;
    std::string gov = cpu_dir + "/" + name + "/cpufreq/scaling_governor";
    if (!r.exists(gov)) continue;
    if (auto t = r.text(gov)) f.governors[*index] = trim(*t);
  }
  auto cpu_list = [&](const std::string& file, std::optional<CpuSet>& out) {
    std::string rel = cpu_dir + "/" + file;
    if (!r.exists(rel)) return;
    auto t = r.text(rel);
    if (!t) return;
    // nohz_full reads " " or "(null)" when unset on some kernels.
    std::string v = trim(*t);
    if (v == "(null)") v.clear();
    if (auto set = CpuSet::parse_list(v)) {
      out = *set;
    } else {
      r.problem(rel, "not a CPU list: '" + v + "'");
    }
  };
  cpu_list("isolated", f.isolated);
  cpu_list("nohz_full", f.nohz_full);
}

// systemd's list syntax: indexes or ranges separated by blanks or commas.
std::optional<CpuSet> parse_systemd_cpu_list(const std::string& value) {
  std::string list = value;
  std::replace(list.begin(), list.end(), ' ', ',');
  std::replace(list.begin(), list.end(), '\t', ',');
  std::string compact;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == ',' && (compact.empty() || compact.back() == ',')) continue;
    compact += list[i];
  }
  while (!compact.empty() && compact.back() == ',')
    compact.pop_back();
  return CpuSet::parse_list(compact);
}

void read_systemd(Reader& r, TuningFacts& f) {
  std::vector<std::string> files;
  if (r.exists("etc/systemd/system.conf")) files.push_back("etc/systemd/system.conf");
  for (const auto& name : r.entries("etc/systemd/system.conf.d")) {
    if (name.size() > 5 && name.ends_with(".conf")) {
      files.push_back("etc/systemd/system.conf.d/" + name);
    }
  }
  for (const auto& file : files) {
    auto t = r.text(file);
    if (!t) continue;
    std::istringstream in(*t);
    for (std::string line; std::getline(in, line);) {
      line = trim(line);
      if (line.rfind("CPUAffinity", 0) != 0) continue;
      size_t eq = line.find('=');
      if (eq == std::string::npos || trim(line.substr(0, eq)) != "CPUAffinity") continue;
      std::string value = trim(line.substr(eq + 1));
      if (value.empty()) {
        f.systemd_cpu_affinity.reset();  // an empty assignment resets the setting
      } else if (auto set = parse_systemd_cpu_list(value)) {
        f.systemd_cpu_affinity = *set;
      } else {
        r.problem(file, "CPUAffinity is not a CPU list: '" + value + "'");
      }
    }
  }
}

std::string module_name(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

void read_modules(Reader& r, TuningFacts& f) {
  if (auto t = r.optional_text("proc/modules")) {
    f.modules_known = true;
    std::istringstream in(*t);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string name;
      if (words >> name) f.modules.insert(module_name(name));
    }
  }
  // Built-in and loaded modules both show in sys/module (a kernel without module support has
  // no proc/modules at all).
  for (const auto& name : r.entries("sys/module")) {
    f.modules.insert(module_name(name));
    f.modules_known = true;
  }
  for (const auto& name : r.entries("etc/modprobe.d")) {
    if (!name.ends_with(".conf")) continue;
    auto t = r.text("etc/modprobe.d/" + name);
    if (!t) continue;
    std::istringstream in(*t);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string keyword, module;
      if (!(words >> keyword >> module) || keyword != "options") continue;
      std::string rest;
      std::getline(words, rest);
      f.modprobe_options[module_name(module)].push_back(trim(rest));
    }
  }
  if (auto t = r.optional_text("proc/driver/nvidia/version")) f.nvidia_driver_text = trim(*t);
}

// "0x10de" → 0x10de.
// "0x10de" within [0, max], else no reading.
std::optional<std::uint32_t> read_hex(Reader& r, const std::string& relative, std::uint32_t max) {
  auto t = r.optional_text(relative);
  if (!t) return std::nullopt;
  auto v = parse_hex(trim(*t), relative, max);
  return v ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(*v)) : std::nullopt;
}

void read_pci_function(Reader& r, TuningFacts& f, const std::string& name) {
  auto address = PciAddress::parse(name);
  if (!address) return;
  const std::string dir = "sys/bus/pci/devices/" + name;
  PciFunctionFacts p;
  p.address = *address;
  if (auto v = read_hex(r, dir + "/vendor", 0xffff)) p.vendor_id = static_cast<std::uint16_t>(*v);
  if (auto v = read_hex(r, dir + "/device", 0xffff)) p.device_id = static_cast<std::uint16_t>(*v);
  if (auto v = read_hex(r, dir + "/class", 0xffffff)) p.class_code = *v;
  if (r.exists(dir + "/numa_node")) {
    // -1 when the firmware gives no locality.
    const std::string rel = dir + "/numa_node";
    if (auto t = r.text(rel)) {
      auto v = whole<int>(*t, rel, -1, static_cast<int>(detail::kMaxNodeIndex));
      if (v) {
        p.numa_node = *v;
      } else {
        r.problem(rel, v.error().problem);
      }
    }
  }
  std::error_code ec;
  fs::path dev = r.path(dir);
  if (auto target = fs::read_symlink(dev / "driver", ec); !ec) {
    p.driver = target.filename().string();
  }
  if (auto t = r.optional_text(dir + "/driver_override")) {
    std::string v = trim(*t);
    if (v != "(null)") p.driver_override = v;
  }
  if (auto target = fs::read_symlink(dev / "iommu_group", ec); !ec) {
    if (auto g = whole<unsigned>(target.filename().string(), "iommu_group")) p.iommu_group = *g;
  }
  // The device's real path names every bridge above it:
  // devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:04.0/0000:1b:00.0
  if (auto target = fs::read_symlink(dev, ec); !ec) {
    for (const auto& part : target.parent_path()) {
      if (auto a = PciAddress::parse(part.string()); a && part.string().size() >= 12) {
        p.upstream_bridges.push_back(*a);
      }
    }
    fs::path parent = r.path("sys/bus/pci/devices") / target.parent_path();
    p.port_max_speed_gts = detail::read_link_speed(parent / "max_link_speed").value_or(0);
    p.port_max_width = detail::read_link_width(parent / "max_link_width").value_or(0);
  }
  if (p.is_bridge()) {
    if (auto config = r.optional_text(dir + "/config")) {
      p.acs_readable = config->size() > kConfigSpaceBase;
      if (p.acs_readable) p.acs_control = find_acs_control(*config);
    }
  }
  f.pci[p.address] = std::move(p);
}

void read_iommu(Reader& r, TuningFacts& f) {
  f.iommu_known = r.exists("sys/class/iommu");
  f.iommu_present = !r.entries("sys/class/iommu").empty();
  for (const auto& name : r.entries("sys/kernel/iommu_groups")) {
    auto id = whole<unsigned>(name, "IOMMU group");
    if (!id) continue;
    IommuGroupFacts g;
    g.id = *id;
    const std::string dir = "sys/kernel/iommu_groups/" + name;
    if (auto t = r.optional_text(dir + "/type")) g.type = trim(*t);
    for (const auto& dev : r.entries(dir + "/devices")) {
      if (auto a = PciAddress::parse(dev)) g.devices.push_back(*a);
    }
    f.iommu_groups[g.id] = std::move(g);
  }
}

// /proc/swaps: a header line, then "Filename Type Size(KiB) Used Priority".
void read_swap(Reader& r, TuningFacts& f) {
  if (auto t = r.optional_text("proc/swaps")) {
    std::istringstream in(*t);
    std::string line;
    std::getline(in, line);
    // Sizes in KiB, their sum still a count of bytes: istream's >> into an unsigned would take
    // "-1" for 2^64-1.
    constexpr std::uint64_t kMaxKib = ~std::uint64_t{0} >> 10;
    std::uint64_t total_kib = 0;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string file, type, size;
      if (!(words >> file >> type >> size)) continue;
      auto size_kib = whole<std::uint64_t>(size, "proc/swaps size", 0, kMaxKib - total_kib);
      if (!size_kib) continue;
      f.swap_devices.push_back(file);
      total_kib += *size_kib;
    }
    f.swap_total_bytes = total_kib * 1024;
    return;
  }
  if (auto t = r.optional_text("proc/meminfo")) {
    std::istringstream in(*t);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("SwapTotal:", 0) != 0) continue;
      if (auto kib = whole<std::uint64_t>(line.substr(10, line.find("kB") - 10), "SwapTotal", 0,
                                          ~std::uint64_t{0} >> 10)) {
        f.swap_total_bytes = *kib * 1024;
      }
    }
  }
}

// proc/mounts' hugetlbfs entries; "pagesize=1G" (or 2M, 1024M, bytes) names the size.
void read_mounts(Reader& r, TuningFacts& f) {
  auto mounts = r.optional_text("proc/mounts");
  if (!mounts) return;
  f.mounts_known = true;
  std::uint64_t default_size = 0;
  if (auto meminfo = r.optional_text("proc/meminfo")) {
    std::istringstream in(*meminfo);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Hugepagesize:", 0) != 0) continue;
      if (auto kib = whole<std::uint64_t>(line.substr(13, line.find("kB") - 13), "Hugepagesize", 1,
                                          ~std::uint64_t{0} >> 10))
        default_size = *kib * 1024;
    }
  }
  std::istringstream in(*mounts);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string device, point, type, options;
    if (!(words >> device >> point >> type >> options) || type != "hugetlbfs") continue;
    std::uint64_t size = default_size;
    std::istringstream opts(options);
    for (std::string o; std::getline(opts, o, ',');) {
      if (o.rfind("pagesize=", 0) != 0) continue;
      std::string v = o.substr(9);
      if (!v.empty() && (v.back() == 'G' || v.back() == 'M' || v.back() == 'K')) v += "iB";
      if (auto b = parse_byte_size(v)) size = *b;
    }
    if (size) f.hugetlbfs_mounts[point] = size;
  }
}

}  // namespace

std::optional<std::string> TuningFacts::kernel_arg(const std::string& key) const {
  std::optional<std::string> value;
  for (const auto& [k, v] : kernel_args) {
    if (k == key) value = v;
  }
  return value;
}

bool TuningFacts::kernel_at_least(unsigned major, unsigned minor) const {
  // The release comes from the host (or a captured tree): read its leading "A.B" with the one
  // number parser, so that a hostile "99999999999.1" is unknown rather than wrapped.
  const std::string_view rel = kernel_release;
  const auto dot = rel.find('.');
  if (dot == std::string_view::npos) return false;
  const auto minor_end = rel.find_first_not_of("0123456789", dot + 1);
  auto a = parse_integer<unsigned>(rel.substr(0, dot), "kernel release", 0, 999999);
  auto b = parse_integer<unsigned>(
      rel.substr(dot + 1, minor_end == std::string_view::npos ? std::string_view::npos
                                                              : minor_end - dot - 1),
      "kernel release", 0, 999999);
  if (!a || !b) return false;
  return *a > major || (*a == major && *b >= minor);
}

const PciFunctionFacts* TuningFacts::pci_function(const PciAddress& address) const {
  auto it = pci.find(address);
  return it == pci.end() ? nullptr : &it->second;
}

bool TuningFacts::module_loaded(const std::string& name) const {
  return modules.count(module_name(name)) > 0;
}

std::vector<std::pair<std::string, std::string>> parse_kernel_cmdline(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> args;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
    if (i >= text.size()) break;
    std::string word;
    bool quoted = false;
    for (; i < text.size(); ++i) {
      char c = text[i];
      if (c == '"') {
        quoted = !quoted;
        continue;
      }
      if (!quoted && std::isspace(static_cast<unsigned char>(c))) break;
      word += c;
    }
    if (word == "--") break;  // what follows is for init
    size_t eq = word.find('=');
    if (eq == std::string::npos) {
      args.emplace_back(word, "");
    } else {
      args.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    }
  }
  return args;
}

std::optional<std::uint16_t> find_acs_control(const std::string& config_space) {
  auto u32 = [&](size_t off) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(config_space[off])) |
           static_cast<std::uint32_t>(static_cast<unsigned char>(config_space[off + 1])) << 8 |
           static_cast<std::uint32_t>(static_cast<unsigned char>(config_space[off + 2])) << 16 |
           static_cast<std::uint32_t>(static_cast<unsigned char>(config_space[off + 3])) << 24;
  };
  size_t offset = kConfigSpaceBase;
  // The list is at most (4096 - 256) / 4 entries long; a loop in it must not hang us.
  for (int hops = 0; hops < 960; ++hops) {
    if (offset < kConfigSpaceBase || offset + 8 > config_space.size()) return std::nullopt;
    std::uint32_t header = u32(offset);
    if (header == 0 || header == 0xffffffff) return std::nullopt;
    if ((header & 0xffff) == kAcsCapabilityId) {
      return static_cast<std::uint16_t>(static_cast<unsigned char>(config_space[offset + 6]) |
                                        static_cast<unsigned char>(config_space[offset + 7]) << 8);
    }
    offset = (header >> 20) & 0xffc;
    if (offset == 0) return std::nullopt;
  }
  return std::nullopt;
}

TuningFacts read_tuning_facts(const std::string& root) {
  TuningFacts f;
  f.root = root;
  if (root.empty()) return f;
  Reader r(root, f);
  read_kernel(r, f);
  read_cpus(r, f);
  read_systemd(r, f);
  read_modules(r, f);
  read_iommu(r, f);
  for (const auto& name : r.entries("sys/bus/pci/devices"))
    read_pci_function(r, f, name);
  read_swap(r, f);
  f.runtime = read_container_runtime_facts(root);
  read_mounts(r, f);
  return f;
}

}  // namespace polyaccel
