// What the NVIDIA CDI spec's createContainer hooks do (dra/cdi_driver.h), in place of NVIDIA's
// nvidia-cdi-hook, for the static program polyaccel-cdi-hook (main.cc). The runtime (runc, crun)
// runs a createContainer hook in the container's mount namespace, after the spec's mounts and
// before pivot_root, with the host's root and the OCI state on stdin: its "bundle" names the
// directory whose config.json has root.path.
//
// The container's image is untrusted: nothing it holds may lead a hook out of its root. Every
// path is resolved inside the container's root (openat2 RESOLVE_IN_ROOT, so that "..", absolute
// links and mount points above the root stay inside it; RESOLVE_NO_MAGICLINKS, so that
// /proc/<pid>/root and /proc/self/fd links are refused), nothing is read from a pseudo file system
// (proc, sysfs, cgroup, ...) whatever the path, and a write lands only on the root's own file
// system (RESOLVE_NO_XDEV: never in a directory the spec or the image mounts from elsewhere).
// update-ldcache writes the cache itself (ld_cache.h): no ldconfig runs, and the image's
// ld.so.conf and ld.so.conf.d lines are never followed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace polyaccel::cdi_hook {

inline constexpr std::size_t kMaxOciStateBytes = 1u << 20;
inline constexpr std::size_t kMaxOciConfigBytes = 16u << 20;
inline constexpr std::size_t kMaxFolderEntries = 100000;  // names read from one --folder
inline constexpr std::uint64_t kMaxLibraryBytes = std::uint64_t{1} << 30;

// The container's root directory on the host from the OCI state JSON (state.bundle +
// config.json's root.path, relative to the bundle unless absolute). "/" is refused.
Result<std::string> container_root_from_state(const std::string& state_json);

// An absolute path in the container, without "." or ".." components or NULs, at most 4096 bytes:
// its components; nullopt otherwise.
std::optional<std::vector<std::string>> container_path(const std::string& path);

// Each "TARGET::LINK": a symbolic link LINK (absolute, in the container) with the text TARGET,
// parent directories made as needed (0755). A link already there with that text is fine;
// anything else already at LINK is left alone and named in the error after the rest are made.
Status create_symlinks(const std::string& container_root, const std::vector<std::string>& links);

// The container's /etc/ld.so.cache rewritten (atomically: temp file, fsync, rename) to hold
// every shared library in `folders` (container paths) under its SONAME, and the entries of the
// image's own cache for every other name (its glibc-hwcaps entries dropped: ld.so then uses the
// baseline ones). A malformed image cache is replaced by one with the folders' libraries only.
Status update_ldcache(const std::string& container_root, const std::vector<std::string>& folders);

}  // namespace polyaccel::cdi_hook
