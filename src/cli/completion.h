// Shell completion (bash, zsh, fish) and man pages, generated from the CLI11 definitions in
// main.cc so that there is one copy of every option's name and text.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "discover/discover.h"

namespace CLI {
class App;
}

namespace polyaccel::cli {

struct CompletionOptions {
  std::string shell;    // completion SHELL
  std::string man_dir;  // man DIR
  // __devices (hidden, for the scripts): the device ids of this host, or of --topology/--fsroot.
  DiscoverOptions devices_of;
};

// Adds `completion SHELL`, `man DIR` and the hidden `__devices` (what the scripts offer after a
// device option such as `topo -C`, as kubectl's `__complete`) to the app.
void add_completion_commands(CLI::App& app, CompletionOptions& options);

// Runs them when selected: the exit code, or nullopt when neither was selected.
std::optional<int> run_completion_commands(const CLI::App& app, const CompletionOptions& options,
                                           std::ostream& out);

std::string completion_script(const CLI::App& app, const std::string& shell);
// roff of one command's page: "polyaccel-mig-plan(1)".
std::string man_page(const CLI::App& command);

}  // namespace polyaccel::cli
