// polyaccel: one binary, one subcommand per file under src/cli/.
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>

#include "cli/agent_dra.h"
#include "cli/agent_partition.h"
#include "cli/commands.h"
#include "cli/completion.h"
#include "cli/config_file.h"
#include "cli/conventions.h"
#include "cli/dra_commands.h"
#include "cli/output_format.h"

int main(int raw_argc, char** raw_argv) {
  using namespace polyaccel::cli;
  // `--name=` is an empty value, not "take the next word" (conventions.h).
  std::vector<std::string> words = split_empty_values(raw_argc, raw_argv);
  std::vector<char*> word_ptrs;
  for (auto& w : words)
    word_ptrs.push_back(w.data());
  word_ptrs.push_back(nullptr);
  int argc = static_cast<int>(words.size());
  char** argv = word_ptrs.data();
  CLI::App app{"polyaccel: the accelerator performance layer (topology, audit, placement, agent)"};
  apply_conventions(app);
  app.require_subcommand(1);
  GlobalOptions g;
  auto add_globals = [&](CLI::App* cmd) {
    non_empty(cmd->add_option("--topology", g.discover.topology_xml,
                              "read the host from an hwloc XML file"))
        ->type_name("FILE");
    non_empty(cmd->add_option("--fsroot", g.discover.fsroot,
                              "read the host from a sysfs/procfs tree (hwloc-gather-topology)"))
        ->type_name("DIR");
    cmd->add_flag("--json", g.json, "print JSON (versioned schema, docs/)");
    one_of(cmd->add_option("--accel-backends", g.discover.backends,
                           "ask NVML/ROCm SMI/HLML: auto (live host only), on, off"),
           std::vector<std::pair<std::string, polyaccel::BackendMode>>{
               {"auto", polyaccel::BackendMode::automatic},
               {"on", polyaccel::BackendMode::on},
               {"off", polyaccel::BackendMode::off}})
        ->type_name("auto|on|off");
    add_output_options(cmd, g);
    add_config_option(cmd, g.config);
  };
  add_globals(&app);
  auto* topo = app.add_subcommand("topo", "show NUMA nodes, CPUs, accelerators, NICs and links");
  add_globals(topo);
  TopoOptions topo_options;
  topo->add_option("-C,--device", topo_options.device,
                   "one device's affinity: CPUs, NUMA node, links (gpu0, nic1, a PCI address)")
      ->type_name("DEVICE");
  one_of(topo->add_option("--of", topo_options.of, "xml: the model as hwloc XML, for --topology"),
         std::vector<std::string>{"xml"})
      ->type_name("FORMAT");
  auto* report = app.add_subcommand("report", "everything polyaccel knows about this host");
  add_globals(report);
  MigOptions mig_options;
  auto* mig = add_mig_command(app, mig_options, add_globals);

  auto* sriov = app.add_subcommand("sriov", "SR-IOV virtual functions");
  sriov->require_subcommand(1);
  auto* sriov_set = sriov->add_subcommand("set", "enable COUNT VFs on a physical function");
  add_globals(sriov_set);
  std::string sriov_pf, sriov_count;
  sriov_set->add_option("PF", sriov_pf, "PCI address, netdev or RDMA device")->required();
  sriov_set->add_option("COUNT", sriov_count, "number of VFs (0 disables them)")->required();

  auto* run = app.add_subcommand("run",
                                 "run CMD bound to its GPUs' CPUs, memory and NICs (torchrun "
                                 "--no-python polyaccel run -- ...)");
  add_globals(run);
  RunCliOptions run_options;
  run->add_option("--gpus", run_options.gpu_count, "take N GPUs, chosen by topology")
      ->type_name("N");
  run->add_option("--gpu", run_options.gpu_ids, "take these GPUs (gpu0 or a PCI address)")
      ->type_name("DEVICE")
      ->allow_extra_args(false);
  run->add_option("--local-rank", run_options.local_rank,
                  "this rank's GPU and share of its CPUs (default: $LOCAL_RANK)")
      ->type_name("R");
  run->add_option("--hugepages", run_options.hugepages,
                  "back malloc with hugepages: 2MiB, 1GiB or thp")
      ->type_name("SIZE");
  run->add_flag("--dry-run", run_options.dry_run, "print what would be done, run nothing");
  run->add_option("--reserve", run_options.reserve,
                  "record the placement as NAME in the allocation state while CMD runs")
      ->type_name("NAME");
  run->add_option("--state", run_options.state, "allocation state file")->type_name("FILE");
  add_libvirt_domains_option(run, run_options.libvirt_domains);
  run->add_option("--spec", run_options.specs,
                  "a flavor extra spec for the placement engine (with --reserve)")
      ->type_name("KEY=VALUE");
  run->add_option("CMD", run_options.argv, "the command and its arguments, after --")->required();

  auto* nccl_topo = app.add_subcommand("nccl-topo", "write an NCCL topology file (NCCL_TOPO_FILE)");
  add_globals(nccl_topo);
  NcclTopoCliOptions nccl_topo_options;
  // -o is the output format everywhere (kubectl's); the file has its own long option.
  non_empty(nccl_topo->add_option("--output-file", nccl_topo_options.output,
                                  "write to FILE (atomically) instead of stdout"))
      ->type_name("FILE");
  one_of(nccl_topo->add_option("--gdr", nccl_topo_options.gdr,
                               "GPUDirect RDMA: auto (peer-memory module loaded), on, off"),
         std::vector<std::string>{"auto", "on", "off"})
      ->type_name("auto|on|off");
  nccl_topo
      ->add_option("--placement", nccl_topo_options.placement,
                   "for the guest of this committed placement")
      ->type_name("NAME");
  nccl_topo->add_option("--state", nccl_topo_options.state, "allocation state file")
      ->type_name("FILE");
  nccl_topo
      ->add_option("--libvirt", nccl_topo_options.libvirt, "the guest's domain XML (virsh dumpxml)")
      ->type_name("FILE");

  PlaceOptions place_options;
  auto* place = app.add_subcommand("place", "fit a VM or process on NUMA nodes, PUs and devices");
  add_globals(place);
  place->add_option("--vcpus", place_options.vcpus, "vCPUs (or PUs for a process)");
  place->add_option("--memory", place_options.memory, "memory, e.g. 64GiB")->type_name("SIZE");
  place
      ->add_option("--spec", place_options.specs,
                   "a flavor extra spec, e.g. hw:cpu_policy=dedicated")
      ->type_name("KEY=VALUE");
  place
      ->add_option("--flavor", place_options.flavor_file,
                   "openstack flavor show -f json output, or our YAML")
      ->type_name("FILE");
  place->add_option("--pci-alias", place_options.pci_aliases, "NAME=VENDOR[:DEVICE[:POLICY]]");
  place
      ->add_option("--pci-alias-file", place_options.pci_alias_file,
                   "Nova [pci] alias JSON objects")
      ->type_name("FILE");
  place->add_option("--state", place_options.state, "allocation state file")->type_name("FILE");
  add_libvirt_domains_option(place, place_options.libvirt_domains);
  place->add_flag("--commit", place_options.commit, "reserve the placement under --name");
  place->add_option("--name", place_options.name, "the allocation's name");
  place->add_flag("--libvirt", place_options.libvirt, "print libvirt domain XML");
  one_of(place->add_option("--strategy", place_options.strategy,
                           "polyaccel (default) or first-fit (Nova's choice, for comparison)"),
         std::vector<std::string>{"polyaccel", "first-fit"})
      ->type_name("STRATEGY");
  place->add_option("--cpu-dedicated-set", place_options.host.cpu_dedicated_set,
                    "Nova's cpu_dedicated_set");
  place->add_option("--cpu-shared-set", place_options.host.cpu_shared_set, "Nova's cpu_shared_set");
  place->add_option("--cpu-allocation-ratio", place_options.host.cpu_allocation_ratio,
                    "Nova's cpu_allocation_ratio: shared vCPUs per PU (default 16)");
  place->add_option("--ram-allocation-ratio", place_options.host.ram_allocation_ratio,
                    "Nova's ram_allocation_ratio (default 1)");
  place
      ->add_option("--reserved-memory-per-node", place_options.host.reserved_memory_per_node,
                   "memory kept for the host on every NUMA node (Nova's reserved_host_memory_mb)")
      ->type_name("SIZE");
  add_hugepage_options(place, place_options.hugepages,
                       "fit as if every node had reserved them (a capture, a host to be set up)");
  std::string release_name;
  auto* release = app.add_subcommand("release", "free a placement committed with place --commit");
  add_globals(release);
  release->add_option("name", release_name, "the allocation's name")->required();
  release->add_option("--state", place_options.state, "allocation state file")->type_name("FILE");
  add_libvirt_domains_option(release, place_options.libvirt_domains);
  auto* allocations =
      app.add_subcommand("allocations", "list the placements committed on this host");
  add_globals(allocations);
  allocations->add_option("--state", place_options.state, "allocation state file")
      ->type_name("FILE");
  add_libvirt_domains_option(allocations, place_options.libvirt_domains);
  FlavorsOptions flavors_options;
  auto* flavors =
      app.add_subcommand("flavors", "OpenStack accelerator flavors that tile this host");
  add_globals(flavors);
  flavors
      ->add_option("--reserve-cores-per-node", flavors_options.reserve_cores_per_node,
                   "cores of every NUMA node kept for the host and emulator threads "
                   "(cpu_shared_set)")
      ->type_name("N")
      ->capture_default_str();
  flavors
      ->add_option("--reserve-memory-per-node", flavors_options.reserve_memory_per_node,
                   "memory of every NUMA node kept for the host, not given to guests")
      ->type_name("SIZE")
      ->capture_default_str();
  flavors
      ->add_option("--page-size", flavors_options.page_size,
                   "guests' huge page size (default: the largest the host reserves, else 1GiB)")
      ->type_name("SIZE");

  auto* audit = app.add_subcommand("audit", "check the host's tuning; a remedy per finding");
  add_globals(audit);
  AuditCommandOptions a;
  non_empty(
      audit->add_option("--root", a.root, "audit a captured host: DIR holds sys/, proc/, etc/"))
      ->type_name("DIR");
  audit->add_option("--only", a.only, "run only these checks (finding ids)")->type_name("ID");
  one_of(audit->add_option("--fail-on", a.fail_on,
                           "exit 1 from this severity up: critical, warning, info"),
         std::vector<std::string>{"critical", "warning", "info"})
      ->type_name("SEVERITY");
  one_of(audit->add_option("--role", a.role, "what the host is for: auto, hypervisor, compute"),
         std::vector<std::string>{"auto", "hypervisor", "compute"})
      ->type_name("ROLE");
  audit->add_option("--pinned-cpus", a.pinned_cpus, "CPUs meant for pinned guests or jobs")
      ->type_name("LIST");
  audit->add_option("--passthrough", a.passthrough, "devices meant for guests (vfio-pci)")
      ->type_name("BDF");
  add_hugepage_options(audit, a.hugepages, "the pages wanted, checked against what is reserved");
  audit->add_option("--emit", a.emit_dir, "write the remedies as files to review and install")
      ->type_name("DIR");
  audit->add_flag("--fix", a.fix, "apply the changes that are safe at run time");

  AgentOptions agent_options;
  auto* agent = app.add_subcommand(
      "agent", "node agent: Prometheus exporter of accelerators and host (/metrics, /healthz)");
  add_globals(agent);
  agent->add_option("--listen", agent_options.listen, "serve on ADDR:PORT")->capture_default_str();
  agent
      ->add_option("--web-config-file", agent_options.web_config_file,
                   "TLS and basic auth for /metrics and /healthz: exporter-toolkit's web config "
                   "(node_exporter's --web.config.file)")
      ->type_name("FILE");
  agent->add_option("--interval", agent_options.interval, "sample every (10s, 500ms, 1m)")
      ->capture_default_str();
  agent
      ->add_option("--otlp-endpoint", agent_options.otlp_endpoint,
                   "also push the hw.* metrics (OpenTelemetry's conventions) over OTLP/HTTP "
                   "protobuf to URL/v1/metrics (an OpenTelemetry Collector's :4318)")
      ->type_name("URL");
  agent->add_option("--otlp-interval", agent_options.otlp_interval, "push every (10s, 1m)")
      ->capture_default_str();
  agent
      ->add_option(
          "--compat", agent_options.compat,
          "name sets: all, none, or a list of polyaccel,dcgm,amd,habana,otel (otel: the hw.* names "
          "to a scraper that negotiates UTF-8 names; not in all)")
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
  agent->add_option("--cluster-name", agent_options.cluster_name,
                    "the cluster_name label of AMD's names (its dashboards select by it)");
  one_of(agent->add_option(
             "--dcgm-hostname-label", agent_options.dcgm_hostname_label,
             "host label of the DCGM names: Hostname (released dcgm-exporter) or hostname"),
         std::vector<std::string>{"Hostname", "hostname"})
      ->capture_default_str();
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
      ->add_option("--nic-config", agent_options.nic_config,
                   "RDMA NIC resources: SR-IOV VF pools (resourceList) and shared HCAs "
                   "(configList), docs/kubernetes.md")
      ->type_name("FILE");
  agent->add_flag("--gpu-rdma-devices", agent_options.gpu_rdma_devices,
                  "GPU Allocate also passes the nearest HCAs' /dev/infiniband nodes");
  agent->add_flag("--pass-device-specs", agent_options.pass_device_specs,
                  "NVIDIA GPUs' Allocate also passes their /dev/nvidia* nodes (NVIDIA's "
                  "PASS_DEVICE_SPECS): for a runtime without the NVIDIA container runtime");
  agent
      ->add_option("--device-list-strategy", agent_options.device_list_strategy,
                   "how Allocate names the devices: envvar, cdi-cri (CDI devices of `polyaccel "
                   "cdi generate`'s specs), envvar,cdi-cri, or auto (envvar,cdi-cri with "
                   "--node-cdi-specs, or where the container runtime has CDI on and the specs "
                   "are there; else envvar)")
      ->capture_default_str();
  agent->add_flag("--node-cdi-specs", agent_options.node_cdi_specs,
                  "write the node's CDI specs (as `polyaccel cdi generate`) into --cdi-dir and "
                  "keep them current, with the hook at --cdi-hook-path: for the device plugin "
                  "on a runtime with CDI and without the NVIDIA container runtime");
  agent
      ->add_option("--nfd-features-dir", agent_options.nfd_features_dir,
                   "where node labels go (node-feature-discovery); empty: none")
      ->capture_default_str();
  agent->add_option("--mig-strategy", agent_options.mig_strategy,
                    "none, single or mixed (default: the sharing config's, else none)");
  agent
      ->add_option("--state", agent_options.state,
                   "allocation state file of `place --commit` (\"\": no placement metrics)")
      ->type_name("FILE")
      ->capture_default_str();
  agent
      ->add_option("--host-root", agent_options.host_root,
                   "where the host sampler reads sys/ and proc/ (NUMA memory, hugepages, PCIe "
                   "links, RDMA ports, the audit), as node_exporter's --path.sysfs; default: / "
                   "or --fsroot, none with --topology")
      ->type_name("DIR");
  agent
      ->add_option("--audit-interval", agent_options.audit_interval,
                   "run the tuning audit every (1m; 100ms..24h, or off: never)")
      ->capture_default_str();

  add_dra_agent_options(agent, agent_options);
  add_partition_agent_options(agent, agent_options);
  DraCliOptions dra_options;
  DraCommands dra = add_dra_commands(app, dra_options, add_globals);

  CompletionOptions completion_options;
  add_completion_commands(app, completion_options);

  if (std::string unknown = unknown_word(app, argc, argv); !unknown.empty()) {
    std::cerr << unknown << "\n";
    return kExitError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitError;
  }
  if (auto rc = run_completion_commands(app, completion_options, std::cout)) return *rc;
  if (auto applied = apply_config_file(app, g.config); !applied) return fail(applied.error());
  if (auto ready = settle_output_options(g); !ready) return fail(ready.error());
  // One check of --topology/--fsroot for every command, before any reads them: mig partition
  // and sriov set read only a few files of the tree and took a missing one for a host without
  // such devices.
  if (auto sources = polyaccel::check_sources(g.discover); !sources) return fail(sources.error());
  // -o yaml and -q: std::cout goes to a buffer, converted or dropped when `output` ends.
  FormattedOutput output(g);
  if (*topo) return run_topo(g, topo_options, std::cout);
  if (*report) return run_report(g, std::cout);
  if (*mig) return run_mig(g, mig_options, std::cout);
  if (*run) return run_run(g, run_options, std::cout);
  if (*nccl_topo) return run_nccl_topo(g, nccl_topo_options, std::cout);
  if (*sriov_set) return run_sriov_set(g, sriov_pf, sriov_count, std::cout);

  if (*place) return run_place(g, place_options, std::cout);
  if (*release)
    return run_release(g, place_options.state, place_options.libvirt_domains, release_name,
                       std::cout);
  if (*allocations)
    return run_allocations(g, place_options.state, place_options.libvirt_domains, std::cout);
  if (*flavors) return run_flavors(g, flavors_options, std::cout);
  if (*audit) return run_audit_command(g, a, std::cout);
  if (*agent) return run_agent(g, agent_options, std::cout);
  if (*dra.dra_slices) return run_dra_slices(g, dra_options, std::cout);
  if (*dra.cdi_generate) return run_cdi_generate(g, dra_options, std::cout);
  return kExitError;
}
