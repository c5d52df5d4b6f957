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
  if (!p.owner.empty()) j["owner"] = p.owner;
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

// Reads a placement's fields, recording the first problem and then returning defaults: the
// first problem is the one reported, so every check (a range, a type, a shape) goes through
// fail(), never straight to the caller, or a later check would be reported in its place.
struct Reader {
  std::string where;
  std::string prefix;  // "cells[0]." while a cell is read: fields are named by their path
  std::optional<Error> error;

  void fail(std::string problem) {
    if (!error) error = bad_input(where, std::move(problem));
  }
  std::string field(const char* key) const { return prefix + key; }
  // The value as it stood in the file, escaped and cut short.
  static std::string value_text(const nlohmann::json& v) { return quote_input(json_text(v, -1)); }

  template <class T>
  T get(const nlohmann::json& j, const char* key) {
    if (error) return T{};
    auto it = j.find(key);
    if (it == j.end()) {
      fail("field '" + field(key) + "' is missing");
      return T{};
    }
    // Numbers range-checked: nlohmann's get<unsigned>() would read 4294967297 as 1.
    if constexpr (std::is_integral_v<T>) {
      auto v = json_integer<T>(*it, field(key));
      if (!v) fail("field '" + field(key) + "': " + v.error().problem);
      return v ? *v : T{};
    } else if constexpr (std::is_same_v<T, std::vector<unsigned>>) {
      std::vector<unsigned> out;
      if (!it->is_array()) {
        fail("field '" + field(key) + "' must be an array, not " + value_text(*it));
        return out;
      }
      for (size_t i = 0; i < it->size(); ++i) {
        auto v = json_integer<unsigned>((*it)[i], key);
        if (!v) {
          fail("field '" + field(key) + "[" + std::to_string(i) + "]': " + v.error().problem);
          return {};
        }
        out.push_back(*v);
      }
      return out;
    } else {
      static_assert(std::is_same_v<T, std::string>);
      if (!it->is_string()) {
        fail("field '" + field(key) + "' must be a string, not " + value_text(*it));
        return T{};
      }
      return it->get<std::string>();
    }
  }
  // A field that must be an array (an object): an empty one once a problem is recorded.
  nlohmann::json array(const nlohmann::json& j, const char* key) {
    return shaped(j, key, nlohmann::json::value_t::array, "an array");
  }
  nlohmann::json object(const nlohmann::json& j, const char* key) {
    return shaped(j, key, nlohmann::json::value_t::object, "an object");
  }
  nlohmann::json shaped(const nlohmann::json& j, const char* key, nlohmann::json::value_t type,
                        const char* type_name) {
    nlohmann::json empty(type);
    if (error) return empty;
    auto it = j.find(key);
    if (it == j.end()) {
      fail("field '" + field(key) + "' is missing");
      return empty;
    }
    if (it->type() != type) {
      fail("field '" + field(key) + "' must be " + type_name + ", not " + value_text(*it));
      return empty;
    }
    return *it;
  }
  CpuSet cpus(const nlohmann::json& j, const char* key) {
    auto text = get<std::string>(j, key);
    if (error) return CpuSet{};
    auto s = CpuSet::parse_list(text);
    if (!s) fail("field '" + field(key) + "' is not a CPU list: " + quote_input(text));
    return s.value_or(CpuSet{});
  }
};

}  // namespace

Result<Placement> placement_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return bad_input("placement", "not a JSON object");
  Reader r{
      "placement " + (j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>()
                                                                  : std::string("?")),
      "", std::nullopt};
  Placement p;
  p.name = r.get<std::string>(j, "name");
  p.vcpus = r.get<unsigned>(j, "vcpus");
  p.memory_bytes = r.get<std::uint64_t>(j, "memory_bytes");
  auto policy = r.get<std::string>(j, "cpu_policy");
  p.cpu_policy = policy == "dedicated" ? CpuPolicy::dedicated
                 : policy == "mixed"   ? CpuPolicy::mixed
                                       : CpuPolicy::shared;
  const nlohmann::json cells = r.array(j, "cells");
  const nlohmann::json devices = r.array(j, "devices");
  // After a problem the arrays are empty and every read returns at once: the first problem is
  // returned at the end.
  for (size_t i = 0; i < cells.size() && !r.error; ++i) {
    const nlohmann::json& cj = cells[i];
    r.prefix = "cells[" + std::to_string(i) + "].";
    if (!cj.is_object()) {
      r.fail("field 'cells[" + std::to_string(i) + "]' must be an object, not " +
             Reader::value_text(cj));
      break;
    }
    CellPlacement c;
    c.guest_cell = r.get<unsigned>(cj, "guest_cell");
    c.host_numa_node = r.get<unsigned>(cj, "host_numa_node");
    c.vcpus = r.get<std::vector<unsigned>>(cj, "vcpus");
    const nlohmann::json pinning = r.object(cj, "cpu_pinning");
    for (const auto& [vcpu, pu] : pinning.items()) {
      auto v = parse_integer<unsigned>(vcpu, "cpu_pinning vCPU");
      auto to = json_integer<unsigned>(pu, "cpu_pinning PU");
      if (!v || !to) {
        r.fail("field '" + r.field("cpu_pinning") + "' entry " + quote_input(vcpu) + ": " +
               Reader::value_text(pu) + " is not vCPU -> PU (whole numbers 0..4294967295)");
        break;
      }
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
  r.prefix.clear();
  p.emulator_pus = r.cpus(j, "emulator_pus");
  p.held_pus = r.cpus(j, "held_pus");
  for (size_t i = 0; i < devices.size() && !r.error; ++i) {
    const nlohmann::json& dj = devices[i];
    r.prefix = "devices[" + std::to_string(i) + "].";
    if (!dj.is_object()) {
      r.fail("field 'devices[" + std::to_string(i) + "]' must be an object, not " +
             Reader::value_text(dj));
      break;
    }
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
