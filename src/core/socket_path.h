// Unix socket paths that servers of ours bind (the device plugin's, the DRA driver's, kubelet's
// plugin registration).
#pragma once

#include <filesystem>

#include "core/error.h"

namespace polyaccel {

// Before a server binds a unix socket at `path`: absent, or a socket left by an earlier run, which
// is removed. Anything else (a directory, a regular file, a FIFO, a link) is refused, not removed,
// and so is a path longer than a socket address holds: our one error, before gRPC would log its
// own (chttp2_server) and fail.
Status prepare_socket_path(const std::filesystem::path& path);

}  // namespace polyaccel
