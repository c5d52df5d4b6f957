// The subcommands, one file each; main.cc parses the command line and calls them.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/hugepage_options.h"
#include "cli/output.h"
#include "discover/discover.h"

namespace CLI {
class App;
}

namespace polyaccel::cli {

// Options every command accepts.
struct GlobalOptions {
  DiscoverOptions discover;  // --topology FILE, --fsroot DIR
  bool json = false;         // --json, or -o json / -o yaml (main converts the JSON to YAML)
  std::string format;        // -o/--format json|yaml|table; empty: --json decides
  ColorMode color = ColorMode::automatic;  // --color
  OutputStyle style;                       // colour and width, from --color and stdout
  bool quiet = false;                      // -q: exit status only, nothing on stdout
  int verbose = 0;                         // -v: more detail in human output
  std::string config;                      // --config FILE (config_file.h)
};

// Exit codes (DESIGN.md): 0 ok, 1 findings or no fit, 2 bad input or failure.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;
inline constexpr int kExitError = 2;

// --json schema of place, release and allocations (docs/placement.md).
inline constexpr int kPlaceSchemaVersion = 1;

// Prints "polyaccel: <message>" on stderr and returns kExitError.
int fail(const Error& error);

// Nova's compute-host settings that shape a fit (place).
struct HostPolicyOptions {
  std::string cpu_dedicated_set;  // --cpu-dedicated-set, Nova's [compute] cpu_dedicated_set
  std::string cpu_shared_set;     // --cpu-shared-set
  double cpu_allocation_ratio = 16.0;
  double ram_allocation_ratio = 1.0;
  std::string reserved_memory_per_node;  // --reserved-memory-per-node SIZE
};

struct PlaceOptions {
  std::optional<unsigned> vcpus;         // unset: from --flavor; 0 is refused, not "missing"
  std::string memory;                    // --memory 64GiB
  std::vector<std::string> specs;        // --spec KEY=VALUE, after the flavor file's
  std::string flavor_file;               // --flavor FILE (openstack flavor show -f json, or YAML)
  std::vector<std::string> pci_aliases;  // --pci-alias NAME=VENDOR:DEVICE
  std::string pci_alias_file;            // --pci-alias-file FILE (Nova's alias JSON)
  std::string state = "/var/lib/polyaccel/allocations.json";
  std::string libvirt_domains;  // --libvirt-domains DIR|none (libvirt_status_dir)
  bool commit = false;
  std::string name;
  bool libvirt = false;
  std::string strategy = "polyaccel";  // or first-fit (Nova's choice, for comparison)
  HostPolicyOptions host;
  HugepageOptions hugepages;  // the what-if: fit as if every node had reserved these pages
};

struct FlavorsOptions {
  unsigned reserve_cores_per_node = 1;
  std::string reserve_memory_per_node = "8GiB";
  std::string page_size;  // empty: the size the host reserves, else 1GiB
};
// `polyaccel audit` (docs/audit.md).
struct AuditCommandOptions {
  std::string root;                      // --root DIR: sys/, proc/, etc/ of the host to audit
  std::vector<std::string> only;         // --only ID...
  std::string fail_on = "warning";       // --fail-on SEVERITY: exit 1 from this severity up
  std::string role = "auto";             // --role auto|hypervisor|compute
  std::string pinned_cpus;               // --pinned-cpus LIST
  std::vector<std::string> passthrough;  // --passthrough BDF...
  HugepageOptions hugepages;             // --hugepages-per-node SIZE --hugepage-size SIZE
  std::string emit_dir;                  // --emit DIR
  bool fix = false;                      // --fix
};
int run_audit_command(const GlobalOptions& options, const AuditCommandOptions& audit,
                      std::ostream& out);

// `polyaccel agent` (agent.cc, docs/exporter.md).
struct AgentOptions {
  std::string listen = ":9477";  // exporter::kDefaultPort, every IPv6 and IPv4 address
  std::string web_config_file;  // exporter-toolkit's web config: TLS, basic auth (docs/exporter.md)
  std::string otlp_endpoint;  // OTLP/HTTP push of the hw.* metrics (cli/agent_otlp.h); empty: none
  std::string otlp_interval = "10s";
  std::string interval = "10s";
  std::string compat = "all";
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string health_config;  // YAML with a health: section (docs/accelerators.md)
  std::string hostname;       // the Hostname/hostname label; default: this host's name
  std::string cluster_name;   // AMD's cluster_name label
  std::string dcgm_hostname_label = "Hostname";  // Hostname (dcgm-exporter 4.x) or hostname
  bool once = false;                             // print one scrape on stdout and exit
  // The device plugin (docs/kubernetes.md); an empty --kubelet-dir turns it off.
  std::string kubelet_dir = "/var/lib/kubelet/device-plugins";
  std::string sharing_config;
  std::string nic_config;          // SR-IOV VF pools and shared HCAs (kube/nic_resources.h)
  bool gpu_rdma_devices = false;   // GPU Allocate adds the nearest HCAs' device nodes
  bool pass_device_specs = false;  // NVIDIA Allocate adds /dev/nvidia* device specs
  std::string device_list_strategy = "auto";  // envvar and/or cdi-cri (kube/allocate.h)
  bool node_cdi_specs = false;                // the agent writes the node CDI specs (agent_cdi.h)
  std::string nfd_features_dir = "/etc/kubernetes/node-feature-discovery/features.d";
  std::string mig_strategy;  // none, single, mixed; empty: the sharing config's, else none
  std::string state = "/var/lib/polyaccel/allocations.json";  // as `place --state`; "" for none
  std::string host_root;  // --host-root: the host sampler's sys/ and proc/; empty: / or --fsroot
  std::string audit_interval = "1m";  // the tuning audit's own interval; "off" for none
  // The DRA driver (docs/dra.md; agent_dra.cc adds and reads these options).
  bool dra = false;
  std::string dra_plugins_dir = "/var/lib/kubelet/plugins";
  std::string dra_registry_dir = "/var/lib/kubelet/plugins_registry";
  std::string cdi_dir = "/var/run/cdi";
  std::string kubeconfig;  // empty: in-cluster config; "none": publish nothing
  std::string node_name;   // empty: $NODE_NAME, else the host's name
  std::string dra_mig_devices = "existing";
  unsigned dra_nic_shares = 0;    // --dra-nic-shares: 0 NICs whole, else shares of each RDMA NIC
  std::string dra_root;           // where device minors are read for CDI; empty: / or --fsroot
  std::string driver_root = "/";  // --driver-root: the NVIDIA driver's user space for CDI
  std::string host_driver_root;   // --host-driver-root: the same root's path on the host
  std::string cdi_hook_path;      // --cdi-hook-path: copied there, run by the runtime as hooks
  std::string nri_socket;         // --nri-socket: the runtime's NRI socket; empty: no NRI plugin
  std::string cpu_manager_state = "/var/lib/kubelet/cpu_manager_state";  // kubelet's policy
  std::string dra_cpus = "off";  // --dra-cpus: off, core, numa (dra/cpu_devices.h)
  bool dra_memory = false;       // --dra-memory: a NUMA node's memory and hugepages as devices
  std::string reserved_cpus;     // --reserved-cpus: kubelet's reservedSystemCPUs, never offered
  // The partition managers (agent_partition.cc; docs/kubernetes.md).
  bool mig_manager = false;  // nvidia.com/mig.config
  std::string mig_config_map = "polyaccel-system/default-mig-parted-config";
  bool amd_partition_manager = false;  // dcm.amd.com/gpu-config-profile
  std::string amd_config_map = "polyaccel-system/config-manager-config";
  bool partition_evict_pods = false;
  std::string partition_pod_wait = "10m";
  std::string partition_state_dir = "/var/lib/polyaccel";
};

int run_place(const GlobalOptions& options, const PlaceOptions& place, std::ostream& out);
// Where libvirt's running domains are read (place/libvirt_domains.h), from --libvirt-domains:
// "none" for none, a directory as given, else <root>/run/libvirt/qemu for the live host and a
// --fsroot tree, none for a --topology capture (it has no /run). docs/placement.md.
std::string libvirt_status_dir(const GlobalOptions& options, const std::string& libvirt_domains);
// Adds --libvirt-domains to a command that counts allocations.
void add_libvirt_domains_option(CLI::App* command, std::string& libvirt_domains);

int run_release(const GlobalOptions& options, const std::string& state,
                const std::string& libvirt_domains, const std::string& name, std::ostream& out);
int run_allocations(const GlobalOptions& options, const std::string& state,
                    const std::string& libvirt_domains, std::ostream& out);
int run_flavors(const GlobalOptions& options, const FlavorsOptions& flavors, std::ostream& out);
int run_report(const GlobalOptions& options, std::ostream& out);
int run_agent(const GlobalOptions& global, const AgentOptions& options, std::ostream& out);

// `polyaccel mig show|plan|apply|partition` (mig.cc, mig_apply.cc).
struct MigOptions {
  std::string action;                    // show, plan, apply, partition
  std::string model;                     // --model: plan for GPUs that are not on this host
  unsigned gpus = 1;                     // --gpus N with --model
  std::vector<unsigned> gpu_indices;     // -i/--gpu-index on this host
  std::string file, config;              // -f FILE -c CONFIG: a mig-parted config
  std::vector<std::string> request;      // PROFILE=COUNT ...
  bool exact = false;                    // --exact: the request is the whole GPU set's layout
  bool force = false;                    // destroy busy instances
  std::string amd_gpu, compute, memory;  // partition: --gpu BDF --compute CPX --memory NPS4
};
// Adds `mig` and its subcommands to `app`, each given the global options by `add_globals`.
CLI::App* add_mig_command(CLI::App& app, MigOptions& options,
                          const std::function<void(CLI::App*)>& add_globals);
int run_mig(const GlobalOptions& options, const MigOptions& mig, std::ostream& out);
struct RunCliOptions {
  std::optional<unsigned> gpu_count;   // --gpus N
  std::vector<std::string> gpu_ids;    // --gpu ID...
  std::optional<unsigned> local_rank;  // --local-rank R
  std::string hugepages;               // --hugepages 2MiB|1GiB|thp
  bool dry_run = false;
  std::string reserve;                                        // --reserve NAME
  std::vector<std::string> specs;                             // --spec KEY=VALUE (with --reserve)
  std::string state = "/var/lib/polyaccel/allocations.json";  // --state FILE
  std::string libvirt_domains;    // --libvirt-domains DIR|none (libvirt_status_dir)
  std::vector<std::string> argv;  // CMD ARGS... after --
};
int run_run(const GlobalOptions& options, const RunCliOptions& cli, std::ostream& out);

struct NcclTopoCliOptions {
  std::string output;        // -o FILE, empty = stdout
  std::string gdr = "auto";  // auto, on, off
  std::string placement;     // --placement NAME: a guest's committed placement
  std::string state = "/var/lib/polyaccel/allocations.json";  // --state FILE
  std::string libvirt;  // --libvirt FILE: that guest's domain XML
};
int run_nccl_topo(const GlobalOptions& options, const NcclTopoCliOptions& cli, std::ostream& out);
int run_sriov_set(const GlobalOptions& options, const std::string& pf, const std::string& count,
                  std::ostream& out);

// The topology for people: summary, the NUMA table with each node's free memory (numactl
// --hardware) read under `root` (the live host's or --fsroot's; "" for an XML capture), then the
// link matrix. One table for topo and report.
void print_topology(const HostModel& model, const std::string& root, std::ostream& out,
                    const OutputStyle& style);

// `polyaccel topo` (topo.cc).
struct TopoOptions {
  std::string device;  // -C ID: one device's affinity (as nvidia-smi topo -C)
  std::string of;      // --of xml: the hwloc XML the model was read from
};
int run_topo(const GlobalOptions& options, const TopoOptions& topo, std::ostream& out);

}  // namespace polyaccel::cli
