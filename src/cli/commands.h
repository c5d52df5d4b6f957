// The subcommands, one file each; main.cc parses the command line and calls them.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "discover/discover.h"

namespace polyaccel::cli {

// Options every command accepts.
struct GlobalOptions {
  DiscoverOptions discover;  // --topology FILE, --fsroot DIR
  bool json = false;         // --json
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
  unsigned vcpus = 0;
  std::string memory;                    // --memory 64GiB
  std::vector<std::string> specs;        // --spec KEY=VALUE, after the flavor file's
  std::string flavor_file;               // --flavor FILE (openstack flavor show -f json, or YAML)
  std::vector<std::string> pci_aliases;  // --pci-alias NAME=VENDOR:DEVICE
  std::string pci_alias_file;            // --pci-alias-file FILE (Nova's alias JSON)
  std::string state = "/var/lib/polyaccel/allocations.json";
  bool commit = false;
  std::string name;
  bool libvirt = false;
  std::string strategy = "polyaccel";  // or first-fit (Nova's choice, for comparison)
  HostPolicyOptions host;
};

struct FlavorsOptions {
  unsigned reserve_cores_per_node = 1;
  std::string reserve_memory_per_node = "8GiB";
  std::string page_size = "1GiB";
};

int run_topo(const GlobalOptions& options, std::ostream& out);
int run_place(const GlobalOptions& options, const PlaceOptions& place, std::ostream& out);
int run_release(const GlobalOptions& options, const std::string& state, const std::string& name,
                std::ostream& out);
int run_allocations(const GlobalOptions& options, const std::string& state, std::ostream& out);
int run_flavors(const GlobalOptions& options, const FlavorsOptions& flavors, std::ostream& out);
int run_report(const GlobalOptions& options, std::ostream& out);
struct RunCliOptions {
  std::optional<unsigned> gpu_count;   // --gpus N
  std::vector<std::string> gpu_ids;    // --gpu ID...
  std::optional<unsigned> local_rank;  // --local-rank R
  std::string hugepages;               // --hugepages 2MiB|1GiB|thp
  bool dry_run = false;
  std::string reserve;                                        // --reserve NAME
  std::vector<std::string> specs;                             // --spec KEY=VALUE (with --reserve)
  std::string state = "/var/lib/polyaccel/allocations.json";  // --state FILE
  std::vector<std::string> argv;                              // CMD ARGS... after --
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

// The topology for people: summary, then the link matrix (shared by topo and report).
void print_topology(const HostModel& model, std::ostream& out);

}  // namespace polyaccel::cli
