#include "place/request.h"

#include "core/strings.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <regex>
#include <set>

namespace polyaccel::place {

const char* to_string(CpuPolicy policy) {
  switch (policy) {
    case CpuPolicy::shared:
      return "shared";
    case CpuPolicy::dedicated:
      return "dedicated";
    case CpuPolicy::mixed:
      return "mixed";
  }
  return "shared";
}

const char* to_string(ThreadPolicy policy) {
  switch (policy) {
    case ThreadPolicy::prefer:
      return "prefer";
    case ThreadPolicy::isolate:
      return "isolate";
    case ThreadPolicy::require:
      return "require";
  }
  return "prefer";
}

const char* to_string(EmulatorThreadsPolicy policy) {
  return policy == EmulatorThreadsPolicy::isolate ? "isolate" : "share";
}

const char* to_string(NicAffinity affinity) {
  switch (affinity) {
    case NicAffinity::none:
      return "none";
    case NicAffinity::pix:
      return "pix";
    case NicAffinity::pxb:
      return "pxb";
    case NicAffinity::phb:
      return "phb";
    case NicAffinity::node:
      return "node";
  }
  return "none";
}

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// hw: keys Nova knows that do not change where a guest is placed: accepted, not acted on.
const std::set<std::string>& inert_hw_keys() {
  static const std::set<std::string> keys = {"hw:boot_menu",
                                             "hw:cpu_cores",
                                             "hw:cpu_max_cores",
                                             "hw:cpu_max_sockets",
                                             "hw:cpu_max_threads",
                                             "hw:cpu_sockets",
                                             "hw:cpu_threads",
                                             "hw:hide_hypervisor_id",
                                             "hw:locked_memory",
                                             "hw:max_cpu_cores",
                                             "hw:max_cpu_sockets",
                                             "hw:max_cpu_threads",
                                             "hw:mem_encryption",
                                             "hw:pmem",
                                             "hw:pmu",
                                             "hw:serial_port_count",
                                             "hw:tpm_model",
                                             "hw:tpm_version",
                                             "hw:vif_multiqueue_enabled",
                                             "hw:virtio_packed_ring",
                                             "hw:watchdog_action",
                                             "hw:viommu_model",
                                             "hw:maxphysaddr_mode",
                                             "hw:maxphysaddr_bits",
                                             "hw:ephemeral_encryption",
                                             "hw:ephemeral_encryption_format",
                                             "hw:cpu_realtime"};
  return keys;
}

Error spec_error(const std::string& key, const std::string& problem, std::string remedy = {}) {
  return bad_input("extra spec " + key, problem, std::move(remedy));
}

Error enum_error(const std::string& key, const std::string& value, const std::string& values) {
  return spec_error(key, "Validation failed; '" + value + "' is not one of: " + values + ".");
}

std::optional<long long> parse_int(const std::string& text) {
  long long v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// Bounds for the counts a flavor may ask for: well past any host (a host with more NUMA nodes or
// PCI devices than this does not exist), small enough that nothing we compute from them can wrap.
constexpr long long kMaxGuestCells = 1024;
constexpr long long kMaxCellIndex = kMaxGuestCells - 1;
constexpr long long kMaxCellMemoryMiB = 1LL << 40;  // 1 EiB
constexpr long long kMaxDeviceCount = 1024;
constexpr long long kMaxResourceCount = 1LL << 20;
constexpr unsigned kMaxRequestVcpus = 1U << 16;

Result<long long> int_spec(const std::string& key, const std::string& value, long long min,
                           long long max) {
  if (value.empty() || value.size() > 24 ||
      value.find_first_not_of("-0123456789") != std::string::npos)
    return spec_error(
        key, "Validation failed; " + quote_input(value) + " is not a valid integer value.");
  auto v = parse_int(value);
  if (v && *v < min)
    return spec_error(key, "Validation failed; " + quote_input(value) +
                               " is less than the min value of '" + std::to_string(min) + "'.");
  if (!v || *v > max)
    return spec_error(key, "Validation failed; " + quote_input(value) +
                               " is greater than the max value of '" + std::to_string(max) + "'.");
  return *v;
}

std::optional<bool> parse_bool(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), ::tolower);
  if (v == "1" || v == "t" || v == "true" || v == "on" || v == "y" || v == "yes") return true;
  if (v == "0" || v == "f" || v == "false" || v == "off" || v == "n" || v == "no") return false;
  return std::nullopt;
}

const char* kCpuSpecPattern = R"(\^?\d+((-\d+)?(,\^?\d+(-\d+)?)?)*)";

}  // namespace

std::optional<CpuSet> parse_cpu_spec(const std::string& text, unsigned vcpus) {
  CpuSet include, exclude;
  bool any_include = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) return std::nullopt;
    bool negate = item[0] == '^';
    if (negate) item.erase(0, 1);
    auto range = CpuSet::parse_list(item);
    if (!range || range->empty() || item.find(',') != std::string::npos) return std::nullopt;
    if (negate) {
      exclude |= *range;
    } else {
      include |= *range;
      any_include = true;
    }
  }
  if (!any_include) {
    for (unsigned i = 0; i < vcpus; ++i)
      include.set(i);
  }
  return include - exclude;
}

Result<std::pair<PageSizeRequest, std::uint64_t>> parse_page_size(const std::string& key,
                                                                  const std::string& value) {
  using R = std::pair<PageSizeRequest, std::uint64_t>;
  if (value == "small") return R{PageSizeRequest::small, 0};
  if (value == "large") return R{PageSizeRequest::large, 0};
  if (value == "any") return R{PageSizeRequest::any, 0};
  static const std::regex validator(R"(\d+([kKMGT]i?)?(b|bit|B)?)");
  if (!std::regex_match(value, validator))
    return spec_error(key, "Validation failed; '" + value +
                               "' is not of the format '(large|small|any|\\d+([kKMGT]i?)?"
                               "(b|bit|B)?)'.");
  std::uint64_t bytes = 0;
  // Nova's page sizes go up to 1 GiB; 2^40 KiB here and 2^20 units below cannot wrap.
  if (value.size() > 18)
    return spec_error(
        key, "Invalid memory page size " + quote_input(value) + " (Nova: MemoryPageSizeInvalid)");
  if (auto kib = parse_int(value)) {
    if (*kib > (1LL << 40))
      return spec_error(
          key, "Invalid memory page size " + quote_input(value) + " (Nova: MemoryPageSizeInvalid)");
    if (*kib == 0) return R{PageSizeRequest::none, 0};  // Nova: 0 counts as not set
    bytes = static_cast<std::uint64_t>(*kib) * 1024;
  } else {
    // Nova converts with oslo's IEC rules at boot: a unit needs a trailing b/bit/B, K/M/G/T
    // are powers of 1024 and "b"/"bit" are bits. "1G" or "2M" pass the validator but fail there.
    static const std::regex iec(R"((\d+)([KMGT])i?(b|bit|B))");
    std::smatch m;
    if (!std::regex_match(value, m, iec))
      return spec_error(key,
                        "Invalid memory page size '" + value + "' (Nova: MemoryPageSizeInvalid)",
                        "write 2MiB, 1GiB, 2048 (KiB), small, large or any");
    auto units = parse_int(m[1].str());
    if (!units || *units > (1LL << 20))
      return spec_error(
          key, "Invalid memory page size " + quote_input(value) + " (Nova: MemoryPageSizeInvalid)",
          "write 2MiB, 1GiB, 2048 (KiB), small, large or any");
    bytes = static_cast<std::uint64_t>(*units);
    bytes <<= 10 * (std::string("KMGT").find(m[2].str()[0]) + 1);
    if (m[3].str() != "B") bytes /= 8;
  }
  if (bytes < 4096 || (bytes & (bytes - 1)) != 0)
    return spec_error(key, "Invalid memory page size '" + value + "' (Nova: MemoryPageSizeInvalid)",
                      "a page size is a power of two of at least 4 KiB");
  return R{PageSizeRequest::exact, bytes};
}

Request process_request(unsigned pus, std::uint64_t memory_bytes,
                        std::vector<DeviceRequest> devices) {
  Request r;
  r.vcpus = pus;
  r.memory_bytes = memory_bytes;
  r.cpu_policy = CpuPolicy::dedicated;
  for (unsigned i = 0; i < pus; ++i)
    r.pinned_vcpus.set(i);
  r.numa_topology = true;
  GuestCell cell;
  for (unsigned i = 0; i < pus; ++i)
    cell.vcpus.push_back(i);
  cell.memory_bytes = memory_bytes;
  r.cells.push_back(std::move(cell));
  r.devices = std::move(devices);
  return r;
}

namespace {

struct Specs {
  std::map<std::string, std::string> values;
  std::optional<std::string> get(const std::string& key) const {
    auto it = values.find(key);
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
};

// Checks each key and value on its own, as Nova's API validator does.
Status validate_keys(const Specs& specs) {
  static const std::regex numa_cell_key(R"(hw:numa_(cpus|mem)\.(\d+))");
  static const std::regex cpu_spec(kCpuSpecPattern);
  for (const auto& [key, value] : specs.values) {
    auto ns_end = key.find(':');
    std::string ns = ns_end == std::string::npos ? "" : key.substr(0, ns_end);
    std::smatch m;
    if (key == "hw:cpu_policy") {
      if (value != "shared" && value != "dedicated" && value != "mixed")
        return enum_error(key, value, "shared, dedicated, mixed");
    } else if (key == "hw:cpu_thread_policy") {
      if (value != "prefer" && value != "isolate" && value != "require")
        return enum_error(key, value, "prefer, isolate, require");
    } else if (key == "hw:emulator_threads_policy") {
      if (value != "share" && value != "isolate") return enum_error(key, value, "share, isolate");
    } else if (key == "hw:pci_numa_affinity_policy") {
      if (!parse_pci_numa_policy(value))
        return enum_error(key, value, "required, legacy, preferred, socket");
    } else if (key == "hw:cpu_dedicated_mask" || key == "hw:cpu_realtime_mask") {
      if (!std::regex_match(value, cpu_spec))
        return spec_error(key, "Validation failed; '" + value + "' is not of the format '" +
                                   kCpuSpecPattern + "'.");
    } else if (key == "hw:numa_nodes") {
      if (auto v = int_spec(key, value, 1, kMaxGuestCells); !v) return v.error();
    } else if (std::regex_match(key, m, numa_cell_key)) {
      if (auto cell = parse_int(m[2].str()); !cell || *cell > kMaxCellIndex)
        return spec_error(key, "cell " + quote_input(m[2].str()) + " is out of range (0.." +
                                   std::to_string(kMaxCellIndex) + ")");
      if (m[1] == "mem") {
        if (auto v = int_spec(key, value, 0, kMaxCellMemoryMiB); !v) return v.error();
      } else if (!std::regex_match(value, cpu_spec)) {
        return spec_error(key, "Validation failed; '" + value + "' is not of the format '" +
                                   kCpuSpecPattern + "'.");
      }
    } else if (key == "hw:mem_page_size") {
      if (auto p = parse_page_size(key, value); !p) return p.error();
    } else if (key == "hw:cpu_realtime") {
      if (!parse_bool(value))
        return spec_error(key,
                          "Validation failed; '" + value + "' is not a valid boolean-like value.");
    } else if (ns == "hw") {
      if (!inert_hw_keys().count(key))
        return spec_error(key, "Validation failed; extra spec '" + key +
                                   "' does not appear to be a valid extra spec.");
    } else if (key == "polyaccel:nic_affinity") {
      if (value != "pix" && value != "pxb" && value != "phb" && value != "node")
        return enum_error(key, value, "pix, pxb, phb, node");
    } else if (key == "polyaccel:rdma_nics") {
      if (auto v = int_spec(key, value, 0, kMaxDeviceCount); !v) return v.error();
    } else if (ns == "polyaccel") {
      return spec_error(key, "unknown polyaccel extra spec",
                        "polyaccel:nic_affinity and polyaccel:rdma_nics are the ones we know");
    } else if (key == "resources:PCPU" || key == "resources:VCPU") {
      if (auto v = int_spec(key, value, 0, kMaxResourceCount); !v) return v.error();
    } else if (ns == "trait" || ns.rfind("trait", 0) == 0) {
      if (value != "required" && value != "forbidden")
        return enum_error(key, value, "required, forbidden");
    } else if (ns == "pci_passthrough" && key != "pci_passthrough:alias") {
      return spec_error(key, "Validation failed; extra spec '" + key +
                                 "' does not appear to be a valid extra spec.");
    }
    // Other namespaces (quota:, aggregate_instance_extra_specs:, resources*:) are not ours.
  }
  return Ok{};
}

Status build_cpu_policy(const Specs& specs, Request& r) {
  auto policy = specs.get("hw:cpu_policy");
  auto pcpu = specs.get("resources:PCPU");
  auto vcpu = specs.get("resources:VCPU");
  auto emulator = specs.get("hw:emulator_threads_policy");
  if (emulator == "isolate") r.emulator_threads = EmulatorThreadsPolicy::isolate;
  r.emulator_threads_given = emulator.has_value();
  if (policy && (pcpu || vcpu))
    return spec_error(pcpu ? "resources:PCPU" : "resources:VCPU",
                      "cannot be combined with hw:cpu_policy", "use hw:cpu_policy=dedicated alone");
  if (pcpu && vcpu && *parse_int(*pcpu) > 0 && *parse_int(*vcpu) > 0)
    return spec_error("resources:PCPU", "mixed instances cannot be requested through resources:",
                      "use hw:cpu_policy=mixed with hw:cpu_dedicated_mask");
  if (pcpu && *parse_int(*pcpu) > 0) {
    unsigned want = r.vcpus + (r.emulator_threads == EmulatorThreadsPolicy::isolate ? 1 : 0);
    if (*parse_int(*pcpu) != static_cast<long long>(want))
      return spec_error(
          "resources:PCPU",
          "asks for " + *pcpu + " PCPUs but the flavor has " + std::to_string(r.vcpus) + " vCPUs",
          "PCPU must equal the vCPUs (+1 with isolated emulator threads)");
    r.cpu_policy = CpuPolicy::dedicated;
  } else if (policy == "dedicated") {
    r.cpu_policy = CpuPolicy::dedicated;
  } else if (policy == "mixed") {
    r.cpu_policy = CpuPolicy::mixed;
  }

  auto mask = specs.get("hw:cpu_dedicated_mask");
  auto realtime = specs.get("hw:cpu_realtime");
  auto rt_mask = specs.get("hw:cpu_realtime_mask");
  bool rt_on = realtime && *parse_bool(*realtime);
  if (mask && r.cpu_policy != CpuPolicy::mixed)
    return spec_error("hw:cpu_dedicated_mask", "needs hw:cpu_policy=mixed",
                      "Nova: RequiredMixedInstancePolicy");
  if (rt_on && r.cpu_policy == CpuPolicy::shared)
    return spec_error("hw:cpu_realtime", "needs hw:cpu_policy=dedicated or mixed",
                      "Nova: RealtimeConfigurationInvalid");
  if (rt_on && !rt_mask)
    return spec_error("hw:cpu_realtime", "needs hw:cpu_realtime_mask",
                      "Nova: RealtimeMaskNotFoundOrInvalid");
  if (r.cpu_policy == CpuPolicy::mixed) {
    if (mask && rt_on)
      return spec_error("hw:cpu_dedicated_mask", "cannot be combined with hw:cpu_realtime_mask",
                        "Nova: MixedInstanceNotSupportByComputeService");
    if (!mask && !rt_on)
      return spec_error("hw:cpu_policy", "mixed needs hw:cpu_dedicated_mask",
                        "Nova: RequiredMixedOrRealtimeCPUMask");
    const std::string key = mask ? "hw:cpu_dedicated_mask" : "hw:cpu_realtime_mask";
    auto pinned = parse_cpu_spec(mask ? *mask : *rt_mask, r.vcpus);
    if (!pinned) return spec_error(key, "is not a CPU list");
    CpuSet all;
    for (unsigned i = 0; i < r.vcpus; ++i)
      all.set(i);
    if (!all.contains(*pinned))
      return spec_error(key, "names vCPUs beyond the flavor's " + std::to_string(r.vcpus),
                        "Nova: InvalidMixedInstanceDedicatedMask");
    if (pinned->empty() || *pinned == all)
      return spec_error(key, "must pin at least one vCPU and leave at least one shared",
                        "Nova: InvalidMixedInstanceDedicatedMask");
    r.pinned_vcpus = *pinned;
  } else if (r.cpu_policy == CpuPolicy::dedicated) {
    for (unsigned i = 0; i < r.vcpus; ++i)
      r.pinned_vcpus.set(i);
  }

  auto thread = specs.get("hw:cpu_thread_policy");
  auto ht_trait = specs.get("trait:HW_CPU_HYPERTHREADING");
  if (thread && ht_trait)
    return spec_error("trait:HW_CPU_HYPERTHREADING",
                      "cannot be combined with hw:cpu_thread_policy");
  if (thread || ht_trait) {
    if (r.cpu_policy == CpuPolicy::shared)
      return spec_error(thread ? "hw:cpu_thread_policy" : "trait:HW_CPU_HYPERTHREADING",
                        "a thread policy needs hw:cpu_policy=dedicated or mixed",
                        "Nova: CPUThreadPolicyConfigurationInvalid");
    if (thread == "isolate" || ht_trait == "forbidden") r.thread_policy = ThreadPolicy::isolate;
    if (thread == "require" || ht_trait == "required") r.thread_policy = ThreadPolicy::require;
  }
  if (r.emulator_threads == EmulatorThreadsPolicy::isolate && r.cpu_policy == CpuPolicy::shared)
    return spec_error("hw:emulator_threads_policy",
                      "isolate needs hw:cpu_policy=dedicated or mixed",
                      "Nova: BadRequirementEmulatorThreadsPolicy");
  return Ok{};
}

Status build_cells(const Specs& specs, Request& r) {
  auto nodes_text = specs.get("hw:numa_nodes");
  unsigned n = nodes_text ? static_cast<unsigned>(*parse_int(*nodes_text)) : 1;
  std::map<unsigned, std::string> cpus, mems;
  static const std::regex numa_cell_key(R"(hw:numa_(cpus|mem)\.(\d+))");
  for (const auto& [key, value] : specs.values) {
    std::smatch m;
    if (!std::regex_match(key, m, numa_cell_key)) continue;
    unsigned id = static_cast<unsigned>(*parse_int(m[2].str()));  // validate_keys bounds it
    if (!nodes_text)
      return spec_error(key, "needs hw:numa_nodes", "set hw:numa_nodes to the number of cells");
    if (id >= n)
      return spec_error(
          key, "names cell " + std::to_string(id) + " but hw:numa_nodes=" + std::to_string(n),
          "Nova: ImageNUMATopologyIncomplete");
    (m[1] == "cpus" ? cpus : mems)[id] = value;
  }
  if (!r.numa_topology) return Ok{};
  const std::uint64_t memory_mib = r.memory_bytes / kMiB;
  if (cpus.empty() && mems.empty()) {
    if (r.vcpus % n != 0)
      return spec_error("hw:numa_nodes",
                        std::to_string(r.vcpus) + " vCPUs do not split evenly into " +
                            std::to_string(n) + " cells",
                        "Nova: ImageNUMATopologyAsymmetric; give hw:numa_cpus.N");
    if (memory_mib % n != 0)
      return spec_error("hw:numa_nodes",
                        std::to_string(memory_mib) + " MiB do not split evenly into " +
                            std::to_string(n) + " cells",
                        "Nova: ImageNUMATopologyAsymmetric; give hw:numa_mem.N");
    for (unsigned i = 0; i < n; ++i) {
      GuestCell c;
      for (unsigned v = i * r.vcpus / n; v < (i + 1) * r.vcpus / n; ++v)
        c.vcpus.push_back(v);
      c.memory_bytes = memory_mib / n * kMiB;
      r.cells.push_back(std::move(c));
    }
    return Ok{};
  }
  CpuSet seen;
  std::uint64_t total_mib = 0;
  for (unsigned i = 0; i < n; ++i) {
    const std::string cpu_key = "hw:numa_cpus." + std::to_string(i);
    const std::string mem_key = "hw:numa_mem." + std::to_string(i);
    if (!cpus.count(i) || !mems.count(i))
      return spec_error(
          cpus.count(i) ? mem_key : cpu_key,
          "is missing: every cell below hw:numa_nodes needs both hw:numa_cpus.N and hw:numa_mem.N",
          "Nova: ImageNUMATopologyIncomplete");
    auto set = parse_cpu_spec(cpus[i], r.vcpus);
    if (!set || set->empty()) return spec_error(cpu_key, "is not a CPU list");
    for (unsigned v : set->to_vector()) {
      if (v >= r.vcpus)
        return spec_error(
            cpu_key,
            "names vCPU " + std::to_string(v) + " but the flavor has " + std::to_string(r.vcpus),
            "Nova: ImageNUMATopologyCPUOutOfRange");
      if (seen.test(v))
        return spec_error(cpu_key, "names vCPU " + std::to_string(v) + " twice",
                          "Nova: ImageNUMATopologyCPUDuplicates");
      seen.set(v);
    }
    GuestCell c;
    c.vcpus = set->to_vector();
    std::uint64_t mib = static_cast<std::uint64_t>(*parse_int(mems[i]));
    c.memory_bytes = mib * kMiB;
    total_mib += mib;
    r.cells.push_back(std::move(c));
  }
  if (seen.count() != r.vcpus)
    return spec_error("hw:numa_cpus",
                      "leave vCPUs " + ([&] {
                        CpuSet missing;
                        for (unsigned v = 0; v < r.vcpus; ++v)
                          if (!seen.test(v)) missing.set(v);
                        return missing.to_list();
                      })() +
                          " in no cell",
                      "Nova: ImageNUMATopologyCPUsUnassigned");
  if (total_mib != memory_mib)
    return spec_error("hw:numa_mem",
                      "add up to " + std::to_string(total_mib) + " MiB but the flavor has " +
                          std::to_string(memory_mib) + " MiB",
                      "Nova: ImageNUMATopologyMemoryOutOfRange; the values are MiB");
  return Ok{};
}

Status build_devices(const Specs& specs, const std::vector<PciAlias>& aliases, Request& r) {
  if (auto policy = specs.get("hw:pci_numa_affinity_policy"))
    r.pci_numa_policy = parse_pci_numa_policy(*policy);
  unsigned device_count = 0;
  if (auto text = specs.get("pci_passthrough:alias")) {
    const std::string key = "pci_passthrough:alias";
    size_t pos = 0;
    while (pos <= text->size()) {
      size_t comma = text->find(',', pos);
      if (comma == std::string::npos) comma = text->size();
      std::string item = text->substr(pos, comma - pos);
      pos = comma + 1;
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      auto colon = item.find(':');
      if (colon == std::string::npos)
        return spec_error(key, "Validation failed; '" + *text +
                                   "' is not of the format "
                                   "'[^:]+:\\d+(?:\\s*,\\s*[^:]+:\\d+)*'.");
      std::string name = item.substr(0, colon);
      auto count = parse_int(item.substr(colon + 1));
      if (!count || *count < 1 || *count > kMaxDeviceCount)
        return spec_error(key, "count '" + item.substr(colon + 1) + "' of alias '" + name +
                                   "' is not a whole number in 1.." +
                                   std::to_string(kMaxDeviceCount));
      auto it = std::find_if(aliases.begin(), aliases.end(),
                             [&](const PciAlias& a) { return a.name == name; });
      if (it == aliases.end())
        return spec_error(key, "PCI alias " + name + " is not defined",
                          "Nova: PciRequestAliasNotDefined; give --pci-alias " + name +
                              "=VENDOR:DEVICE or --pci-alias-file");
      for (const auto& d : r.devices) {
        if (d.alias.name == name) return spec_error(key, "names alias '" + name + "' twice");
      }
      r.devices.push_back({*it, static_cast<unsigned>(*count)});
      device_count += static_cast<unsigned>(*count);
    }
  }
  if (auto affinity = specs.get("polyaccel:nic_affinity")) {
    r.nic_affinity = *affinity == "pix"   ? NicAffinity::pix
                     : *affinity == "pxb" ? NicAffinity::pxb
                     : *affinity == "phb" ? NicAffinity::phb
                                          : NicAffinity::node;
    if (device_count == 0)
      return spec_error("polyaccel:nic_affinity", "needs a device to sit close to",
                        "request accelerators with pci_passthrough:alias");
    r.rdma_nics = device_count;  // one NIC per device unless polyaccel:rdma_nics says otherwise
  }
  if (auto nics = specs.get("polyaccel:rdma_nics")) {
    r.rdma_nics = static_cast<unsigned>(*parse_int(*nics));
    r.rdma_nics_given = true;
  }
  return Ok{};
}

}  // namespace

Result<Request> parse_request(const RequestInput& input, const std::vector<PciAlias>& aliases) {
  if (input.vcpus == 0) return bad_input("vcpus", "a request needs at least one vCPU");
  // The layout below is built vCPU by vCPU: a bound well past any host keeps a hostile request
  // from costing gigabytes (the CLI refuses anything larger than the host before this).
  if (input.vcpus > kMaxRequestVcpus)
    return bad_input("vcpus", std::to_string(input.vcpus) + " is more than the largest request (" +
                                  std::to_string(kMaxRequestVcpus) + ")");
  if (input.memory_bytes == 0 || input.memory_bytes % kMiB != 0)
    return bad_input("memory", "must be a positive whole number of MiB, as Nova's flavor RAM");
  Specs specs;
  for (const auto& [k, v] : input.extra_specs)
    specs.values[k] = v;
  if (auto s = validate_keys(specs); !s) return s.error();

  Request r;
  r.vcpus = input.vcpus;
  r.memory_bytes = input.memory_bytes;
  if (auto s = build_cpu_policy(specs, r); !s) return s.error();
  if (auto page = specs.get("hw:mem_page_size")) {
    auto p = parse_page_size("hw:mem_page_size", *page);
    r.page_size = p->first;
    r.page_size_bytes = p->second;
  }
  r.numa_topology = specs.get("hw:numa_nodes").has_value() ||
                    r.page_size != PageSizeRequest::none || r.cpu_policy != CpuPolicy::shared;
  if (auto s = build_cells(specs, r); !s) return s.error();
  if (auto s = build_devices(specs, aliases, r); !s) return s.error();
  return r;
}

}  // namespace polyaccel::place
