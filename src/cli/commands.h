// The subcommands, one file each; main.cc parses the command line and calls them.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "discover/discover.h"

namespace CLI {
class App;
}

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

int run_topo(const GlobalOptions& options, std::ostream& out);
int run_report(const GlobalOptions& options, std::ostream& out);

// `polyaccel mig show|plan|apply|partition` (mig.cc, mig_apply.cc).
struct MigOptions {
  std::string action;                    // show, plan, apply, partition
  std::string model;                     // --model: plan for GPUs that are not on this host
  unsigned gpus = 1;                     // --gpus N with --model
  std::vector<unsigned> gpu_indices;     // -i/--gpu-index on this host
  std::string file, config;              // -f FILE -c CONFIG: a mig-parted config
  std::vector<std::string> request;      // PROFILE=COUNT ...
  bool force = false;                    // destroy busy instances
  std::string amd_gpu, compute, memory;  // partition: --gpu BDF --compute CPX --memory NPS4
};
// Adds `mig` and its subcommands to `app`, each given the global options by `add_globals`.
CLI::App* add_mig_command(CLI::App& app, MigOptions& options,
                          const std::function<void(CLI::App*)>& add_globals);
int run_mig(const GlobalOptions& options, const MigOptions& mig, std::ostream& out);

// The topology for people: summary, then the link matrix (shared by topo and report).
void print_topology(const HostModel& model, std::ostream& out);

}  // namespace polyaccel::cli
