// The subcommands, one file each; main.cc parses the command line and calls them.
#pragma once

#include <iosfwd>
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

// Prints "polyaccel: <message>" on stderr and returns kExitError.
int fail(const Error& error);

// `polyaccel audit` (docs/audit.md).
struct AuditCommandOptions {
  std::string root;                      // --root DIR: sys/, proc/, etc/ of the host to audit
  std::vector<std::string> only;         // --only ID...
  std::string fail_on = "warning";       // --fail-on SEVERITY: exit 1 from this severity up
  std::string role = "auto";             // --role auto|hypervisor|compute
  std::string pinned_cpus;               // --pinned-cpus LIST
  std::vector<std::string> passthrough;  // --passthrough BDF...
  std::string hugepages_per_node;        // --hugepages-per-node SIZE
  std::string hugepage_size = "2MiB";    // --hugepage-size SIZE
  std::string emit_dir;                  // --emit DIR
  bool fix = false;                      // --fix
};
int run_audit_command(const GlobalOptions& options, const AuditCommandOptions& audit,
                      std::ostream& out);

int run_topo(const GlobalOptions& options, std::ostream& out);
int run_report(const GlobalOptions& options, std::ostream& out);

// The topology for people: summary, then the link matrix (shared by topo and report).
void print_topology(const HostModel& model, std::ostream& out);

}  // namespace polyaccel::cli
