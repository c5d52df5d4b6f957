// `polyaccel dra slices` and `polyaccel cdi generate` (dra.cc, cdi.cc; docs/dra.md): what the DRA
// driver publishes and what it gives containers, without an API server or kubelet.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace polyaccel::cli {

struct DraCliOptions {
  std::string node;                      // --node NAME; default: the host's name
  std::string mig_devices = "existing";  // --mig-devices existing|all
  unsigned nic_shares = 0;               // --nic-shares N (slices): shares of each RDMA NIC
  std::string root;                      // --root DIR: where /sys, /proc and /dev are read (cdi)
  std::string cdi_dir;                   // --cdi-dir DIR (cdi generate)
  std::string cdi_version;               // --cdi-version
  std::string driver_root = "/";         // --driver-root DIR: the NVIDIA driver's files
  std::string host_driver_root;          // --host-driver-root DIR: the same on the host
  std::string cdi_hook_path;  // --cdi-hook-path: default polyaccel-cdi-hook beside this binary
  bool install_hook = false;  // --install-hook: copy that program to --cdi-hook-path
  bool no_hooks = false;      // --no-hooks
};

// Adds `dra slices` and `cdi generate` to `app`; returns the two subcommands to test after parse.
struct DraCommands {
  CLI::App* dra_slices = nullptr;
  CLI::App* cdi_generate = nullptr;
};
DraCommands add_dra_commands(CLI::App& app, DraCliOptions& options,
                             const std::function<void(CLI::App*)>& add_globals);

int run_dra_slices(const GlobalOptions& global, const DraCliOptions& options, std::ostream& out);
int run_cdi_generate(const GlobalOptions& global, const DraCliOptions& options, std::ostream& out);

// The node name the agent and `dra slices` use: --node, else the model's or this host's name,
// lower-cased (Node names are lower case).
std::string dra_node_name(const HostModel& model, const std::string& option);

// The agent's Node name (its DRA driver and partition managers): --node-name, else $NODE_NAME,
// else dra_node_name's; an Error naming --node-name when it is not a DNS subdomain.
Result<std::string> agent_node_name(const HostModel& model, const std::string& option);

}  // namespace polyaccel::cli
