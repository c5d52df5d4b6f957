// `polyaccel release NAME`: frees a placement that `place --commit` recorded.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/json.h"
#include "core/strings.h"
#include "place/allocation_store.h"
#include "place/libvirt_domains.h"

namespace polyaccel::cli {

int run_release(const GlobalOptions& g, const std::string& state_path,
                const std::string& libvirt_domains, const std::string& name, std::ostream& out) {
  // A guest libvirt runs is counted, never ours to free: it stops counting when it stops.
  if (name.starts_with(place::kLibvirtNamePrefix)) {
    const std::string domain = name.substr(std::string_view(place::kLibvirtNamePrefix).size());
    auto state = place::AllocationStore(state_path, libvirt_status_dir(g, libvirt_domains)).load();
    const bool running =
        state && std::any_of(state->domains.begin(), state->domains.end(),
                             [&](const place::Placement& p) { return p.name == name; });
    return fail(bad_input(
        quote_input(name),
        std::string(running ? "is a guest libvirt runs" : "names a libvirt guest") + " (domain " +
            quote_input(domain) +
            "), not a placement of polyaccel's: release frees only what `place --commit` "
            "recorded",
        "stop the guest where it was started, in Nova (openstack server stop) or with virsh "
        "destroy " +
            quote_input(domain) + "; it stops counting when it stops running"));
  }
  // The same guard as place: a state file of another host is not ours to rewrite.
  auto model = discover_host(g.discover);
  if (!model) return fail(model.error());
  // Nothing to release in a state that does not exist: said before the store's update, which
  // would leave its lock file behind in the state's directory.
  // Only an absent name: a link loop or an unreadable file is the store's to explain.
  std::error_code ec;
  if (std::filesystem::symlink_status(state_path, ec).type() ==
      std::filesystem::file_type::not_found) {
    return fail(bad_input(name, "is not allocated: " + state_path + " does not exist",
                          "place --commit records placements there; --state names another file"));
  }
  place::AllocationStore store(state_path);
  size_t remaining = 0;
  auto s = store.update([&](place::AllocationState& state) -> Result<bool> {
    if (!state.host.empty() && !model->hostname.empty() && state.host != model->hostname)
      return bad_input(
          state_path,
          "records placements of host '" + state.host + "', this is '" + model->hostname + "'",
          "point --state at this host's file");
    auto it = std::find_if(state.placements.begin(), state.placements.end(),
                           [&](const place::Placement& p) { return p.name == name; });
    if (it == state.placements.end()) return bad_input(name, "is not allocated in " + state_path);
    state.placements.erase(it);
    remaining = state.placements.size();
    return true;
  });
  if (!s) return fail(s.error());
  if (g.json) {
    out << json_text(nlohmann::json{{"schema_version", kPlaceSchemaVersion},
                                    {"released", name},
                                    {"remaining", remaining}})
        << "\n";
  } else {
    out << "released " << name << " (" << plural(remaining, "allocation") << " left in "
        << state_path << ")\n";
  }
  return kExitOk;
}

}  // namespace polyaccel::cli
