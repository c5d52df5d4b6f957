#include "cli/agent_cdi.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>

#include "core/log.h"
#include "dra/cdi.h"
#include "dra/cdi_hook.h"
#include "dra/slices.h"

namespace polyaccel::cli {
namespace {

namespace fs = std::filesystem;

// The node specs of the device plugin's devices (whole GPUs and HPUs, existing MIG instances,
// NICs): cdi generate's.
std::vector<dra::CdiSpec> node_specs_of(const HostModel& model, const std::string& root,
                                        const AgentOptions& o, const dra::CdiOptions& co,
                                        std::vector<std::string>& skipped) {
  dra::SliceOptions so;
  so.node = "node";  // the pool's name plays no part in CDI
  so.mig = dra::MigDevices::existing;
  auto pool = dra::build_pool(model, so);
  if (!pool) {
    skipped.push_back(pool.error().message());
    return std::vector<dra::CdiSpec>{};
  }
  auto host = dra::read_cdi_host(model, root, o.driver_root, o.host_driver_root);
  for (const auto& n : host.nvidia_driver.notes)
    skipped.push_back(n);
  return dra::node_specs(model, *pool, host, co, &skipped);
}

}  // namespace

Result<std::string> install_cdi_hook(const AgentOptions& o, const std::string& who) {
  if (o.cdi_hook_path.empty()) {
    if (std::getenv("KUBERNETES_SERVICE_HOST")) {
      log_line("polyaccel agent: " + who + ": the CDI specs' hooks name " +
               dra::default_hook_path() +
               ", a path in this agent's container, which the runtime on the host cannot "
               "run: give --cdi-hook-path on a hostPath volume (docs/dra.md)");
    }
    return dra::default_hook_path();
  }
  Status installed = dra::install_hook_program(dra::default_hook_path(), o.cdi_hook_path);
  if (installed) installed = dra::check_hook_program(o.cdi_hook_path);
  if (!installed) return installed.error();
  return o.cdi_hook_path;
}

Status subscribe_node_cdi_specs(AcceleratorMonitor& monitor, const AgentOptions& o,
                                const DiscoverOptions& discover) {
  if (!o.node_cdi_specs) return Ok{};
  auto hook = install_cdi_hook(o, "node CDI specs");
  if (!hook) return hook.error();
  dra::CdiOptions co;
  co.hook_path = *hook;
  const std::string root = o.dra_root.empty() ? filesystem_root(discover) : o.dra_root;
  struct State {
    std::set<std::string> files;  // the specs written last: a class that empties loses its file
    std::string said;             // the last problem, said once
  };
  auto state = std::make_shared<State>();
  log_line("polyaccel agent: node CDI specs in " + o.cdi_dir + ", hooks " + *hook);
  monitor.subscribe([o, co, root, state](const AcceleratorSnapshot& snap,
                                         const MonitorChange& change) {
    if (!change.device_set || !snap.ready) return;
    std::vector<std::string> skipped;
    auto specs = node_specs_of(*snap.host, root, o, co, skipped);
    std::string problem;
    std::set<std::string> files;
    for (const auto& s : specs) {
      Status st = dra::write_cdi_spec(o.cdi_dir, s);
      if (!st) {
        problem = st.error().message();
        continue;
      }
      files.insert(s.file_name());
    }
    for (const auto& f : state->files) {
      if (files.count(f)) continue;
      Status st = dra::remove_cdi_spec(o.cdi_dir, f);
      if (!st) problem = st.error().message();
    }
    if (problem.empty()) state->files = files;
    // Skips (a GPU whose driver is not loaded, a driver root without NVML) are said with the
    // problem: once each time they change.
    for (const auto& k : skipped)
      problem += (problem.empty() ? "skipped: " : "; skipped: ") + k;
    if (problem != state->said) {
      log_line(
          "polyaccel agent: node CDI specs: " +
          (problem.empty() ? std::to_string(specs.size()) + " written to " + o.cdi_dir : problem));
    }
    state->said = problem;
  });
  return Ok{};
}

}  // namespace polyaccel::cli
