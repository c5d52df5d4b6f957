#include "place/placement.h"

#include "core/json.h"
#include "core/number.h"
#include "core/strings.h"

namespace polyaccel::place {

namespace {

nlohmann::json cpuset_json(const CpuSet& s) {
  return s.to_list();
}

}  // namespace

nlohmann::json to_json(const Placement& p) {
  nlohmann::json j;
  j["name"] = p.name;
  j["vcpus"] = p.vcpus;
  j["memory_bytes"] = p.memory_bytes;
  j["cpu_policy"] = to_string(p.cpu_policy);
  j["cells"] = nlohmann::json::array();
  for (const auto& c : p.cells) {
    nlohmann::json cj;
    cj["guest_cell"] = c.guest_cell;
    cj["host_numa_node"] = c.host_numa_node;
    cj["vcpus"] = c.vcpus;
    cj["cpu_pinning"] = nlohmann::json::object();
    for (const auto& [vcpu, pu] : c.pinning)
      cj["cpu_pinning"][std::to_string(vcpu)] = pu;
    cj["shared_vcpus"] = c.shared_vcpus;
    cj["shared_pus"] = cpuset_json(c.shared_pus);
    cj["memory_bytes"] = c.memory_bytes;
    cj["page_size_bytes"] =
        c.page_size_bytes ? nlohmann::json(c.page_size_bytes) : nlohmann::json();
    j["cells"].push_back(cj);
  }
  j["emulator_pus"] = cpuset_json(p.emulator_pus);
  j["held_pus"] = cpuset_json(p.held_pus);
  j["devices"] = nlohmann::json::array();
  for (const auto& d : p.devices) {
    nlohmann::json dj;
    dj["pci_bus_id"] = d.pci_bus_id;
    dj["numa_node"] = d.numa_node ? nlohmann::json(*d.numa_node) : nlohmann::json();
    dj["kind"] = d.kind;
    dj["id"] = d.id;
    dj["alias"] = d.alias;
    dj["guest_cell"] = d.guest_cell;
    j["devices"].push_back(dj);
  }
  return j;
}

namespace {

struct Reader {
  std::string where;
  std::optional<Error> error;

  template <class T>
  T get(const nlohmann::json& j, const char* key) {
    if (error) return T{};
    auto it = j.find(key);
    // Numbers range-checked: nlohmann's get<unsigned>() would read 4294967297 as 1.
    if constexpr (std::is_integral_v<T>) {
      if (it == j.end()) {
        error = bad_input(where, std::string("field '") + key + "' is missing");
        return T{};
      }
      auto v = json_integer<T>(*it, key);
      if (!v) error = bad_input(where, "field " + v.error().message());
      return v ? *v : T{};
    } else if constexpr (std::is_same_v<T, std::vector<unsigned>>) {
      std::vector<unsigned> out;
      if (it == j.end() || !it->is_array()) {
        error = bad_input(where, std::string("field '") + key + "' is missing or not an array");
        return out;
      }
      for (const auto& item : *it) {
        auto v = json_integer<unsigned>(item, key);
        if (!v) {
          error = bad_input(where, "field " + v.error().message());
          return {};
        }
        out.push_back(*v);
      }
      return out;
    }
    try {
      if (it == j.end()) throw std::runtime_error("missing");
      return it->get<T>();
    } catch (const std::exception&) {
      error = bad_input(where, std::string("field '") + key + "' is missing or has the wrong type");
      return T{};
    }
  }
  CpuSet cpus(const nlohmann::json& j, const char* key) {
    auto text = get<std::string>(j, key);
    auto s = CpuSet::parse_list(text);
    if (!s && !error)
      error = bad_input(where, std::string("field '") + key + "' is not a CPU list");
    return s.value_or(CpuSet{});
  }
};

}  // namespace

Result<Placement> placement_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return bad_input("placement", "not a JSON object");
  Reader r{
      "placement " + (j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>()
                                                                  : std::string("?")),
      std::nullopt};
  Placement p;
  p.name = r.get<std::string>(j, "name");
  p.vcpus = r.get<unsigned>(j, "vcpus");
  p.memory_bytes = r.get<std::uint64_t>(j, "memory_bytes");
  auto policy = r.get<std::string>(j, "cpu_policy");
  p.cpu_policy = policy == "dedicated" ? CpuPolicy::dedicated
                 : policy == "mixed"   ? CpuPolicy::mixed
                                       : CpuPolicy::shared;
  const nlohmann::json cells = r.get<nlohmann::json>(j, "cells");
  const nlohmann::json devices = r.get<nlohmann::json>(j, "devices");
  if (!cells.is_array() || !devices.is_array())
    return bad_input(r.where, "fields 'cells' and 'devices' must be arrays");
  for (const auto& cj : cells) {
    CellPlacement c;
    c.guest_cell = r.get<unsigned>(cj, "guest_cell");
    c.host_numa_node = r.get<unsigned>(cj, "host_numa_node");
    c.vcpus = r.get<std::vector<unsigned>>(cj, "vcpus");
    const nlohmann::json pinning = r.get<nlohmann::json>(cj, "cpu_pinning");
    if (!pinning.is_object()) return bad_input(r.where, "field 'cpu_pinning' must be an object");
    for (const auto& [vcpu, pu] : pinning.items()) {
      auto v = parse_integer<unsigned>(vcpu, "cpu_pinning vCPU");
      auto to = json_integer<unsigned>(pu, "cpu_pinning PU");
      if (!v || !to)
        return bad_input(r.where, "cpu_pinning entry " + quote_input(vcpu) + " is not vCPU -> PU");
      c.pinning.emplace_back(*v, *to);
    }
    c.shared_vcpus = r.get<std::vector<unsigned>>(cj, "shared_vcpus");
    c.shared_pus = r.cpus(cj, "shared_pus");
    c.memory_bytes = r.get<std::uint64_t>(cj, "memory_bytes");
    auto page = cj.find("page_size_bytes");
    c.page_size_bytes = 0;
    if (page != cj.end() && !page->is_null())
      c.page_size_bytes = r.get<std::uint64_t>(cj, "page_size_bytes");
    p.cells.push_back(std::move(c));
  }
  p.emulator_pus = r.cpus(j, "emulator_pus");
  p.held_pus = r.cpus(j, "held_pus");
  for (const auto& dj : devices) {
    DevicePlacement d;
    d.pci_bus_id = r.get<std::string>(dj, "pci_bus_id");
    if (dj.contains("numa_node") && !dj["numa_node"].is_null())
      d.numa_node = r.get<unsigned>(dj, "numa_node");
    d.kind = r.get<std::string>(dj, "kind");
    d.id = r.get<std::string>(dj, "id");
    d.alias = r.get<std::string>(dj, "alias");
    d.guest_cell = r.get<unsigned>(dj, "guest_cell");
    p.devices.push_back(std::move(d));
  }
  if (r.error) return *r.error;
  return p;
}

}  // namespace polyaccel::place
