#include "launch/reservation.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cerrno>

#include "core/file_io.h"
#include "core/json.h"
#include "core/number.h"
#include "place/allocation_store.h"
#include "place/fit.h"
#include "place/host_view.h"
#include "place/request.h"

namespace polyaccel {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kOwnersSchema = "polyaccel-run-owners";

std::string boot_id() {
  auto id = read_first_line("/proc/sys/kernel/random/boot_id");
  return id ? *id : std::string();
}

fs::path owners_path(const fs::path& state) {
  return state.string() + ".runs";
}

using Owners = std::map<std::string, ProcessIdentity>;

Result<Owners> load_owners(const fs::path& path) {
  Owners owners;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return owners;  // no run yet
  auto text = read_input_file(path, kMaxStateFileBytes, "run owner file");
  if (!text) return text.error();
  try {
    json j = json::parse(*text);
    if (j.at("schema") != kOwnersSchema || j.at("schema_version") != 1)
      throw std::runtime_error("");
    for (const auto& [name, o] : j.at("runs").items()) {
      auto pid = json_integer<int>(o.at("pid"), "pid", 1);
      auto start_time = json_integer<std::uint64_t>(o.at("start_time"), "start_time");
      if (!pid || !start_time) throw std::runtime_error("");
      owners[name] = ProcessIdentity{*pid, *start_time, o.at("boot_id").get<std::string>()};
    }
  } catch (const std::exception&) {
    return bad_input(path.string(), "is not a run owner file this version wrote",
                     "move it away (its reservations then stay until released)");
  }
  return owners;
}

Status save_owners(const fs::path& path, const Owners& owners) {
  json runs = json::object();
  for (const auto& [name, o] : owners)
    runs[name] = {{"pid", o.pid}, {"start_time", o.start_time}, {"boot_id", o.boot_id}};
  json j = {{"schema", kOwnersSchema}, {"schema_version", 1}, {"runs", runs}};
  return write_file_atomically(path, json_text(j) + "\n");
}

void erase_placement(place::AllocationState& state, const std::string& name) {
  std::erase_if(state.placements, [&](const place::Placement& p) { return p.name == name; });
}

// The engine's answer for `cells` guest cells, or nullopt when that many do not fit.
Result<std::optional<place::Placement>> try_fit(const place::HostView& view,
                                                const std::vector<place::Placement>& placements,
                                                const RunReservationRequest& r, unsigned cells) {
  const unsigned pus = r.gpus > 0 ? r.gpus * r.pus_per_gpu : r.pus;
  place::RequestInput input;
  input.vcpus = pus;
  input.memory_bytes = std::uint64_t{cells} * (64u << 20);  // a token: the run allocates its own
  input.extra_specs = {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", std::to_string(cells)}};
  std::vector<place::PciAlias> aliases;
  if (r.gpus > 0) {
    aliases.push_back(
        place::PciAlias{"gpu", r.gpu_vendor_id, std::nullopt, place::PciNumaPolicy::required});
    input.extra_specs.emplace_back("pci_passthrough:alias", "gpu:" + std::to_string(r.gpus));
  }
  for (const auto& [key, value] : r.extra_specs) {
    auto same = std::find_if(input.extra_specs.begin(), input.extra_specs.end(),
                             [&wanted = key](const auto& kv) { return kv.first == wanted; });
    if (same != input.extra_specs.end()) {
      same->second = value;
    } else {
      input.extra_specs.emplace_back(key, value);
    }
  }
  auto request = place::parse_request(input, aliases);
  if (!request) return request.error();
  auto result = place::fit(view, placements, *request);
  if (!result) return result.error();
  if (!result->fit) return std::optional<place::Placement>{};
  return std::optional<place::Placement>{result->placement};
}

// Fewest NUMA cells first: one, then every divisor of the GPU count (or the cells --spec names).
Result<std::optional<place::Placement>> engine_choice(
    const place::HostView& view, const std::vector<place::Placement>& placements,
    const RunReservationRequest& r) {
  const unsigned max_cells = std::max(r.gpus, 1u);
  const bool cells_given = std::any_of(r.extra_specs.begin(), r.extra_specs.end(),
                                       [](const auto& kv) { return kv.first == "hw:numa_nodes"; });
  for (unsigned cells = 1; cells <= max_cells; ++cells) {
    if (max_cells % cells != 0 || (cells_given && cells > 1)) continue;
    auto p = try_fit(view, placements, r, cells);
    if (!p || *p) return p;
  }
  return std::optional<place::Placement>{};
}

}  // namespace

Result<std::vector<std::string>> engine_gpu_choice(const HostModel& model,
                                                   const std::vector<place::Placement>& placements,
                                                   const RunReservationRequest& request) {
  auto view = place::build_host_view(model, place::HostPolicy{});
  if (!view) return view.error();
  auto chosen = engine_choice(*view, placements, request);
  if (!chosen) return chosen.error();
  std::vector<std::string> ids;
  if (*chosen) {
    for (const auto& d : (*chosen)->devices) {
      if (d.kind == "accelerator") ids.push_back(d.id);
    }
  }
  return ids;
}

std::optional<ProcessIdentity> process_identity(int pid) {
  auto stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  // The command name may hold spaces and parentheses: fields start after the last ')'.
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> fields;
  size_t pos = close + 2;
  while (pos < stat->size()) {
    size_t end = stat->find(' ', pos);
    if (end == std::string::npos) end = stat->size();
    fields.push_back(stat->substr(pos, end - pos));
    pos = end + 1;
  }
  // fields[0] is field 3 (state), so field 22 (starttime) is fields[19].
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") return std::nullopt;
  auto start_time = parse_unsigned(fields[19], "starttime");
  if (!start_time) return std::nullopt;
  return ProcessIdentity{pid, *start_time, boot_id()};
}

bool is_alive(const ProcessIdentity& owner) {
  auto now = process_identity(owner.pid);
  return now && *now == owner;
}

unsigned pus_per_gpu(const HostModel& model, const CpuSet& allowed) {
  std::map<unsigned, unsigned> gpus_on_node;
  for (const auto& a : model.accelerators) {
    if (!a.pci.numa_nodes.empty()) gpus_on_node[a.pci.numa_nodes.front()]++;
  }
  unsigned best = 0;
  for (const auto& [node, gpus] : gpus_on_node) {
    const NumaNode* n = model.numa_node(node);
    if (!n) continue;
    unsigned share = (n->cpus & allowed).count() / gpus;
    if (share > 0 && (best == 0 || share < best)) best = share;
  }
  return std::max(best, 1u);
}

Result<RunReservation> reserve_for_run(const HostModel& model, const fs::path& state_path,
                                       const RunReservationRequest& r,
                                       const ProcessIdentity& owner) {
  auto view = place::build_host_view(model, place::HostPolicy{});
  if (!view) return view.error();
  place::AllocationStore store(state_path, r.libvirt_status_dir);
  RunReservation out;
  bool no_fit = false;
  auto status = store.update([&](place::AllocationState& state) -> Result<bool> {
    if (!state.host.empty() && !view->hostname.empty() && state.host != view->hostname) {
      return bad_input(state_path.string(), "records placements of host '" + state.host + "'");
    }
    auto owners = load_owners(owners_path(state_path));
    if (!owners) return owners.error();
    // Reclaim: owners that are gone, and owner records whose placement was released by hand.
    for (auto it = owners->begin(); it != owners->end();) {
      if (!is_alive(it->second) || !state.find(it->first)) {
        if (state.find(it->first)) out.reclaimed.push_back(it->first);
        erase_placement(state, it->first);
        it = owners->erase(it);
      } else {
        ++it;
      }
    }
    if (state.find(r.name)) {
      return bad_input("--reserve " + r.name, "is already allocated in " + state_path.string(),
                       "choose another name or release it");
    }
    auto chosen = engine_choice(*view, state.all(), r);
    if (!chosen) return chosen.error();
    // Stale records were removed: worth writing even without a fit.
    const bool changed = !out.reclaimed.empty();
    if (!*chosen) {
      no_fit = true;
      if (changed) {
        if (auto s = save_owners(owners_path(state_path), *owners); !s) return s.error();
      }
      return changed;
    }
    (*chosen)->name = r.name;
    if (state.host.empty()) state.host = view->hostname;
    state.placements.push_back(**chosen);
    (*owners)[r.name] = owner;
    // The owner file first: a crash before the state write leaves an owner record without a
    // placement, which the next reservation drops.
    if (auto s = save_owners(owners_path(state_path), *owners); !s) return s.error();
    out.placement = **chosen;
    return true;
  });
  if (!status) return status.error();
  if (no_fit) {
    return Error{ErrorCode::unsupported, "--reserve " + r.name,
                 r.gpus > 0 ? "no " + std::to_string(r.gpus) + " free GPUs with " +
                                  std::to_string(r.gpus * r.pus_per_gpu) + " free local PUs"
                            : "no " + std::to_string(r.pus) + " free PUs on one NUMA node",
                 "see the reservations with `polyaccel report`, or wait"};
  }
  for (const auto& d : out.placement.devices) {
    if (d.kind == "accelerator") out.gpu_ids.push_back(d.id);
  }
  for (const auto& c : out.placement.cells) {
    for (const auto& [vcpu, pu] : c.pinning)
      out.cpus.set(pu);
  }
  return out;
}

Status release_run(const fs::path& state_path, const std::string& name,
                   const ProcessIdentity& owner) {
  place::AllocationStore store(state_path);
  return store.update([&](place::AllocationState& state) -> Result<bool> {
    auto owners = load_owners(owners_path(state_path));
    if (!owners) return owners.error();
    auto it = owners->find(name);
    if (it == owners->end() || !(it->second == owner)) return false;
    owners->erase(it);
    if (auto s = save_owners(owners_path(state_path), *owners); !s) return s.error();
    erase_placement(state, name);
    return true;
  });
}

}  // namespace polyaccel
