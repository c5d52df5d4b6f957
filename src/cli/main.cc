// polyaccel: one binary, one subcommand per file under src/cli/.
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>

#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace polyaccel::cli;
  CLI::App app{"polyaccel: the accelerator performance layer (topology, audit, placement, agent)"};
  app.require_subcommand(1);
  GlobalOptions g;
  auto add_globals = [&](CLI::App* cmd) {
    cmd->add_option("--topology", g.discover.topology_xml, "read the host from an hwloc XML file")
        ->type_name("FILE");
    cmd->add_option("--fsroot", g.discover.fsroot,
                    "read the host from a sysfs/procfs tree (hwloc-gather-topology)")
        ->type_name("DIR");
    cmd->add_flag("--json", g.json, "print JSON (versioned schema, docs/)");
    cmd->add_option("--accel-backends", g.discover.backends,
                    "ask NVML/ROCm SMI/HLML: auto (live host only), on, off")
        ->transform(CLI::CheckedTransformer(
            std::map<std::string, polyaccel::BackendMode>{
                {"auto", polyaccel::BackendMode::automatic},
                {"on", polyaccel::BackendMode::on},
                {"off", polyaccel::BackendMode::off}},
            CLI::ignore_case));
  };
  add_globals(&app);
  auto* topo = app.add_subcommand("topo", "show NUMA nodes, CPUs, accelerators, NICs and links");
  add_globals(topo);
  auto* report = app.add_subcommand("report", "everything polyaccel knows about this host");
  add_globals(report);

  AgentOptions agent_options;
  auto* agent = app.add_subcommand(
      "agent", "node agent: Prometheus exporter of accelerators and host (/metrics, /healthz)");
  add_globals(agent);
  agent->add_option("--listen", agent_options.listen, "serve on ADDR:PORT")->capture_default_str();
  agent->add_option("--interval", agent_options.interval, "sample every (10s, 500ms, 1m)")
      ->capture_default_str();
  agent
      ->add_option("--compat", agent_options.compat,
                   "name sets: all, none, or a list of polyaccel,dcgm,amd,habana")
      ->capture_default_str();
  agent
      ->add_option("--pod-resources-socket", agent_options.pod_resources_socket,
                   "kubelet's pod-resources socket; empty: no pod labels")
      ->capture_default_str();
  agent
      ->add_option("--health-config", agent_options.health_config,
                   "YAML file with a health: section")
      ->type_name("FILE");
  agent->add_option("--hostname", agent_options.hostname, "the hostname label");
  agent->add_flag("--once", agent_options.once, "print one scrape on stdout and exit");
  agent
      ->add_option("--kubelet-dir", agent_options.kubelet_dir,
                   "device plugin sockets and kubelet.sock; empty: no device plugin")
      ->capture_default_str();
  agent
      ->add_option("--sharing-config", agent_options.sharing_config,
                   "time-slicing in NVIDIA's device plugin config format")
      ->type_name("FILE");
  agent
      ->add_option("--nfd-features-dir", agent_options.nfd_features_dir,
                   "where node labels go (node-feature-discovery); empty: none")
      ->capture_default_str();
  agent->add_option("--mig-strategy", agent_options.mig_strategy,
                    "none, single or mixed (default: the sharing config's, else none)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitError;
  }
  if (*topo) return run_topo(g, std::cout);
  if (*report) return run_report(g, std::cout);
  if (*agent) return run_agent(g, agent_options, std::cout);
  return kExitError;
}
