// Installing polyaccel-cdi-hook (src/cdi_hook/), the static program the NVIDIA specs name as
// their createContainer hooks, where the node's container runtime runs it: the host path of a
// hostPath volume when the agent runs in a container (the DRA overlay: /var/lib/polyaccel/bin),
// and checking at start that what is there can run on that node.
#pragma once

#include <string>

#include "core/error.h"

namespace polyaccel::dra {

inline constexpr const char* kHookProgramName = "polyaccel-cdi-hook";

// The running binary's own path ("" when /proc/self/exe cannot be read).
std::string self_path();

// polyaccel-cdi-hook beside the running binary: where the image, the .deb and the build tree
// put it (the default --cdi-hook-path, and what --install-hook copies).
std::string default_hook_path();

// Copies `source` to `dest` atomically with mode 0755 (temp file, fsync, rename) unless `dest`
// already has the same content; nothing to do when both are the same file.
Status install_hook_program(const std::string& source, const std::string& dest);

// What the runtime will find at `path` can run on any Linux node: an ELF executable for this
// machine without a program interpreter (statically linked: it needs nothing the node may
// lack), that answers `version` (run here, with an empty environment) within 5 s. The error
// says what is wrong: missing, a dynamically linked build, a noexec mount, ...
Status check_hook_program(const std::string& path);

}  // namespace polyaccel::dra
