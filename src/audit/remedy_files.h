// The remedies of a set of findings as files an operator can review and install (`audit
// --emit`). Pure: the command writes what this returns.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "audit/finding.h"

namespace polyaccel {

// Kernel arguments of every finding, each once; several pci=disable_acs_redir= are joined with
// ';' (the kernel keeps only the last one).
std::vector<std::string> merged_kernel_args(const std::vector<Finding>& findings);

// Relative path → content. Files with nothing to say are left out:
//   kernel-cmdline.txt                              arguments to add to the kernel command line
//   sysctl.d/90-polyaccel.conf                      sysctls
//   modprobe.d/polyaccel.conf                       module options and soft dependencies
//   modules-load.d/polyaccel.conf                   modules to load at boot
//   systemd/system.conf.d/90-polyaccel.conf         systemd manager settings (CPUAffinity)
//   systemd/polyaccel-hugepages.service             the per-node hugepage reservation at boot
//   commands.sh                                     the remaining commands, for review
std::map<std::string, std::string> remedy_files(const std::vector<Finding>& findings);

}  // namespace polyaccel
