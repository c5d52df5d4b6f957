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

  auto* audit = app.add_subcommand("audit", "check the host's tuning; a remedy per finding");
  add_globals(audit);
  AuditCommandOptions a;
  audit->add_option("--root", a.root, "audit a captured host: DIR holds sys/, proc/, etc/")
      ->type_name("DIR");
  audit->add_option("--only", a.only, "run only these checks (finding ids)")->type_name("ID");
  audit->add_option("--fail-on", a.fail_on, "exit 1 from this severity up: critical, warning, info")
      ->type_name("SEVERITY");
  audit->add_option("--role", a.role, "what the host is for: auto, hypervisor, compute");
  audit->add_option("--pinned-cpus", a.pinned_cpus, "CPUs meant for pinned guests or jobs")
      ->type_name("LIST");
  audit->add_option("--passthrough", a.passthrough, "devices meant for guests (vfio-pci)")
      ->type_name("BDF");
  audit
      ->add_option("--hugepages-per-node", a.hugepages_per_node,
                   "hugepages wanted on every NUMA node (64GiB)")
      ->type_name("SIZE");
  audit->add_option("--hugepage-size", a.hugepage_size, "page size for --hugepages-per-node")
      ->type_name("SIZE");
  audit->add_option("--emit", a.emit_dir, "write the remedies as files to review and install")
      ->type_name("DIR");
  audit->add_flag("--fix", a.fix, "apply the changes that are safe at run time");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitError;
  }
  if (*topo) return run_topo(g, std::cout);
  if (*report) return run_report(g, std::cout);
  if (*audit) return run_audit_command(g, a, std::cout);
  return kExitError;
}
