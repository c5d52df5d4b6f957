// The subcommands, one file each; main.cc parses the command line and calls them.
#pragma once

#include <iosfwd>
#include <string>

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

// Prints "polyaccel: <message>" on stderr and returns kExitError.
int fail(const Error& error);

// `polyaccel agent` (agent.cc, docs/exporter.md).
struct AgentOptions {
  std::string listen = "0.0.0.0:9477";  // exporter::kDefaultPort
  std::string interval = "10s";
  std::string compat = "all";
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string health_config;  // YAML with a health: section (docs/accelerators.md)
  std::string hostname;       // the Hostname/hostname label; default: this host's name
  bool once = false;          // print one scrape on stdout and exit
  // The device plugin (docs/kubernetes.md); an empty --kubelet-dir turns it off.
  std::string kubelet_dir = "/var/lib/kubelet/device-plugins";
  std::string sharing_config;
  std::string nfd_features_dir = "/etc/kubernetes/node-feature-discovery/features.d";
  std::string mig_strategy;  // none, single, mixed; empty: the sharing config's, else none
};

int run_topo(const GlobalOptions& options, std::ostream& out);
int run_report(const GlobalOptions& options, std::ostream& out);
int run_agent(const GlobalOptions& global, const AgentOptions& options, std::ostream& out);

// The topology for people: summary, then the link matrix (shared by topo and report).
void print_topology(const HostModel& model, std::ostream& out);

}  // namespace polyaccel::cli
