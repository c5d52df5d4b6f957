// `polyaccel cdi hook create-symlinks|update-ldcache`: what the NVIDIA spec's createContainer
// hooks do (cdi_driver.h), in place of NVIDIA's nvidia-cdi-hook, which a host without the
// NVIDIA Container Toolkit does not have. The runtime (runc, crun) runs a createContainer hook
// in the container's mount namespace, after the spec's mounts and before pivot_root, with the
// OCI state on stdin: its "bundle" names the directory whose config.json has root.path.
//
// Everything read is hostile: the state and config.json are size-limited JSON, root.path must
// name a directory, a link's path is absolute without "..", and every path in the container is
// resolved inside its root (openat2 RESOLVE_IN_ROOT, or after chroot), so that a symbolic link
// in the image cannot make the hook write on the host.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace polyaccel::dra {

inline constexpr std::size_t kMaxOciStateBytes = 1u << 20;
inline constexpr std::size_t kMaxOciConfigBytes = 16u << 20;

// The container's root directory on the host from the OCI state JSON (state.bundle +
// config.json's root.path, relative to the bundle unless absolute). "/" is refused.
Result<std::string> container_root_from_state(const std::string& state_json);

// Each "TARGET::LINK": a symbolic link LINK (absolute, in the container) with the text TARGET,
// parent directories made as needed (0755). A link already there with that text is fine;
// anything else already at LINK is left alone and named in the error after the rest are made.
Status create_symlinks(const std::string& container_root, const std::vector<std::string>& links);

// Runs the host's ldconfig (`ldconfig_path`, opened on the host, a static executable as Debian's
// and most distributions' are) chrooted into the container's root, so that its paths (ld.so.conf,
// the libraries, /etc/ld.so.cache) are the container's whatever links they hold: first writes
// /etc/ld.so.conf.d/00-polyaccel-cdi.conf naming `folders` (and an /etc/ld.so.conf including
// ld.so.conf.d when the image has none), then `ldconfig -f /etc/ld.so.conf -C /etc/ld.so.cache
// FOLDER...`. The container's own ldconfig is never run on the host's behalf.
Status update_ldcache(const std::string& container_root, const std::vector<std::string>& folders,
                      const std::string& ldconfig_path);

// Copies the running binary (/proc/self/exe) to `path` atomically with mode 0755 (temp file,
// fsync, rename) unless `path` already has the same content: the hook's host path when the agent
// runs in a container. Nothing to do when `path` is the running binary itself.
Status install_hook_binary(const std::string& path);

// The running binary's own path (the default hook path).
std::string self_path();

}  // namespace polyaccel::dra
