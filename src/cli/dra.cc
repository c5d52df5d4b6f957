// `polyaccel dra slices`: the ResourceSlice objects the agent's DRA driver would publish for this
// host (docs/dra.md), printed without an API server.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iomanip>
#include <iostream>

#include "cli/conventions.h"
#include "cli/dra_commands.h"
#include "dra/cdi.h"
#include "dra/slices.h"

namespace polyaccel::cli {

namespace {

using json = nlohmann::json;

std::string attribute_text(const dra::Device& d, const std::string& key) {
  auto it = d.attributes.find(key);
  if (it == d.attributes.end()) return "-";
  if (it->second.kind == dra::Attribute::Kind::integer) return std::to_string(it->second.integer);
  return it->second.text;
}

}  // namespace

std::string dra_node_name(const HostModel& model, const std::string& option) {
  if (!option.empty()) return option;  // checked as given: a Node's name is lower case
  std::string name = model.hostname;
  if (name.empty()) {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) == 0) name = buf;
  }
  for (char& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

Result<std::string> agent_node_name(const HostModel& model, const std::string& option) {
  std::string node = option;
  if (node.empty()) {
    const char* env = std::getenv("NODE_NAME");
    if (env) node = env;
  }
  node = dra_node_name(model, node);
  if (!dra::is_dns_subdomain(node))
    return bad_input("--node-name " + node, "is not a DNS subdomain (a Node's name)");
  return node;
}

DraCommands add_dra_commands(CLI::App& app, DraCliOptions& options,
                             const std::function<void(CLI::App*)>& add_globals) {
  DraCommands c;
  auto* dra = app.add_subcommand("dra", "Kubernetes DRA driver (resource.k8s.io/v1)");
  dra->require_subcommand(1);
  c.dra_slices = dra->add_subcommand("slices", "the ResourceSlices this node would publish");
  add_globals(c.dra_slices);
  c.dra_slices->add_option("--node", options.node, "the Node's name (default: this host's)");
  one_of(c.dra_slices->add_option("--mig-devices", options.mig_devices,
                                  "MIG devices: existing instances, or all placements"),
         std::vector<std::string>{"existing", "all"})
      ->capture_default_str();
  c.dra_slices
      ->add_option("--nic-shares", options.nic_shares,
                   "share each RDMA NIC among this many claims (2-1000; 0: one claim each)")
      ->capture_default_str();

  auto* cdi = app.add_subcommand("cdi", "Container Device Interface specs");
  cdi->require_subcommand(1);
  c.cdi_generate = cdi->add_subcommand("generate", "CDI specs for this node's devices");
  add_globals(c.cdi_generate);
  // The CDI directory, named as the agent's --cdi-dir: -o is the output format everywhere.
  non_empty(c.cdi_generate->add_option("--cdi-dir", options.cdi_dir,
                                       "write the specs into DIR (atomically), e.g. /var/run/cdi"))
      ->type_name("DIR");
  c.cdi_generate
      ->add_option("--root", options.root,
                   "read device minors under DIR (its sys/, proc/); default: --fsroot or /")
      ->type_name("DIR");
  // A runtime skips a spec of a version its CDI library does not know, or one below what the
  // spec uses, and says only "unresolvable CDI devices" (podman 4.3 knows up to 0.5.0): only
  // released versions from 0.5.0 (digit-led device names, hostPath) are written.
  one_of(c.cdi_generate->add_option(
             "--cdi-version", options.cdi_version,
             "cdiVersion to write: 0.5.0, 0.6.0, 0.7.0 or 0.8.0 (default: " +
                 std::string(dra::kCdiVersion) +
                 ", the lowest the specs need, which podman 4.3 and containerd 1.7 read)"),
         std::vector<std::string>{"0.5.0", "0.6.0", "0.7.0", "0.8.0"})
      ->type_name("VERSION");
  one_of(c.cdi_generate->add_option("--mig-devices", options.mig_devices,
                                    "MIG devices: existing or all"),
         std::vector<std::string>{"existing", "all"});
  c.cdi_generate
      ->add_option("--driver-root", options.driver_root,
                   "where the NVIDIA driver's libraries and binaries are (/run/nvidia/driver for "
                   "the GPU Operator's driver container)")
      ->type_name("DIR")
      ->capture_default_str();
  c.cdi_generate
      ->add_option("--host-driver-root", options.host_driver_root,
                   "where the host has --driver-root when this runs in a container that mounts "
                   "it elsewhere (default: the same)")
      ->type_name("DIR");
  c.cdi_generate
      ->add_option("--cdi-hook-path", options.cdi_hook_path,
                   "host path of polyaccel-cdi-hook, the static program the runtime runs as the "
                   "spec's hooks (default: the one beside this binary; in a container, a host "
                   "path with --install-hook)")
      ->type_name("PATH");
  c.cdi_generate->add_flag("--install-hook", options.install_hook,
                           "copy the polyaccel-cdi-hook beside this binary to --cdi-hook-path "
                           "first (atomically), then check that it runs there");
  c.cdi_generate->add_flag("--no-hooks", options.no_hooks,
                           "no create-symlinks/update-ldcache hooks (mounts only)");
  return c;
}

int run_dra_slices(const GlobalOptions& global, const DraCliOptions& options, std::ostream& out) {
  auto model = discover_host(global.discover);
  if (!model) return fail(model.error());
  dra::SliceOptions so;
  so.node = dra_node_name(*model, options.node);
  so.mig = options.mig_devices == "all" ? dra::MigDevices::all : dra::MigDevices::existing;
  so.nic_shares = options.nic_shares;
  auto pool = dra::build_pool(*model, so);
  if (!pool) return fail(pool.error());
  if (global.json) {
    json slices = json::array();
    for (size_t i = 0; i < pool->slices.size(); ++i)
      slices.push_back(dra::slice_json(*pool, i, 1));
    json j = {{"schema_version", dra::kSlicesSchemaVersion},
              {"driver", pool->driver},
              {"node", pool->node},
              {"resourceSlices", std::move(slices)}};
    out << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return kExitOk;
  }
  out << "driver " << pool->driver << ", pool " << pool->node << ": " << pool->device_count()
      << " devices in " << pool->slices.size() << " ResourceSlice(s)\n";
  for (size_t i = 0; i < pool->slices.size(); ++i) {
    const auto& s = pool->slices[i];
    out << "\n"
        << dra::slice_name(*pool, i) << " (" << s.devices.size() << " devices, "
        << s.shared_counters.size() << " counter sets)\n";
    out << std::left << std::setw(28) << "  DEVICE" << std::setw(15) << "TYPE" << std::setw(14)
        << "PCI" << std::setw(12) << "PCIE-ROOT" << std::setw(6) << "NUMA"
        << "PRODUCT\n";
    for (const auto& d : s.devices) {
      out << "  " << std::setw(26) << d.name << std::setw(15) << attribute_text(d, "type")
          << std::setw(14) << attribute_text(d, "resource.kubernetes.io/pciBusID") << std::setw(12)
          << attribute_text(d, "resource.kubernetes.io/pcieRoot") << std::setw(6)
          << attribute_text(d, "resource.kubernetes.io/numaNode")
          << attribute_text(d, d.kind == dra::DeviceKind::mig ? "migProfile" : "product")
          << (d.taints.empty() ? "" : "  [tainted]") << "\n";
    }
  }
  return kExitOk;
}

}  // namespace polyaccel::cli
