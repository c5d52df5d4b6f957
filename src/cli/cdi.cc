// `polyaccel cdi generate`: the CDI specs of this node's devices (docs/dra.md), printed or
// written into a CDI directory (/var/run/cdi) for containerd 2.x, CRI-O and podman.
#include <iostream>

#include "cli/dra_commands.h"
#include "core/strings.h"
#include "dra/cdi.h"
#include "dra/cdi_hook.h"

namespace polyaccel::cli {

inline constexpr int kCdiSchemaVersion = 1;

int run_cdi_generate(const GlobalOptions& global, const DraCliOptions& options, std::ostream& out) {
  auto model = discover_host(global.discover);
  if (!model) return fail(model.error());
  dra::SliceOptions so;
  so.node = dra_node_name(*model, "");
  if (!dra::is_dns_subdomain(so.node)) so.node = "node";  // the pool's name plays no part in CDI
  so.mig = options.mig_devices == "all" ? dra::MigDevices::all : dra::MigDevices::existing;
  auto pool = dra::build_pool(*model, so);
  if (!pool) return fail(pool.error());
  std::string root = options.root.empty() ? filesystem_root(global.discover) : options.root;
  dra::CdiOptions co;
  if (!options.cdi_version.empty()) co.version = options.cdi_version;
  if (!options.no_hooks) {
    co.hook_path = options.cdi_hook_path.empty() ? dra::default_hook_path() : options.cdi_hook_path;
    if (options.install_hook) {
      if (options.cdi_hook_path.empty()) {
        return fail(Error{ErrorCode::bad_input, "--install-hook", "needs --cdi-hook-path",
                          "name the host path the runtime will run"});
      }
      Status st = dra::install_hook_program(dra::default_hook_path(), options.cdi_hook_path);
      if (st) st = dra::check_hook_program(options.cdi_hook_path);
      if (!st) return fail(st.error());
    }
  }
  std::vector<std::string> skipped;
  auto host = dra::read_cdi_host(*model, root, options.driver_root, options.host_driver_root);
  auto specs = dra::node_specs(*model, *pool, host, co, &skipped);
  for (const auto& n : host.nvidia_driver.notes)
    skipped.push_back(n);
  if (!options.cdi_dir.empty()) {
    for (const auto& s : specs) {
      Status st = dra::write_cdi_spec(options.cdi_dir, s);
      if (!st) return fail(st.error());
    }
  }
  // Every device skipped (no spec of any): nothing was written, which is not success (exit 1, as
  // "no fit"); a node without devices at all is, as there is nothing to describe.
  const bool nothing_described = specs.empty() && !skipped.empty();
  if (global.json) {
    nlohmann::json j = {{"schema_version", kCdiSchemaVersion},
                        {"specs", nlohmann::json::array()},
                        {"skipped", skipped}};
    for (const auto& s : specs)
      j["specs"].push_back(dra::to_json(s));
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return nothing_described ? kExitFindings : kExitOk;
  }
  for (const auto& s : specs) {
    out << s.kind << " (" << s.devices.size() << " devices)"
        << (options.cdi_dir.empty() ? "" : " written to " + options.cdi_dir + "/" + s.file_name())
        << "\n";
    for (const auto& d : s.devices)
      out << "  " << s.qualified_name(d.name) << "\n";
  }
  // Skips are diagnostics, not output: stderr, so that stdout stays the list of specs.
  for (const auto& k : skipped)
    std::cerr << "polyaccel cdi generate: skipped: " << printable(k) << "\n";
  if (nothing_described) {
    std::cerr << "polyaccel cdi generate: no device could be described, nothing written\n";
  }
  return nothing_described ? kExitFindings : kExitOk;
}

}  // namespace polyaccel::cli
