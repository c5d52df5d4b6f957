#include "core/socket_path.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace polyaccel {

namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a socket";
}

}  // namespace

Status prepare_socket_path(const std::filesystem::path& path) {
  const std::string& name = path.native();
  // sockaddr_un's sun_path: 108 bytes with the terminating NUL.
  constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
  if (name.size() > kMaxSocketPath)
    return bad_input(name,
                     "is " + std::to_string(name.size()) +
                         " bytes long: a unix socket path holds at most " +
                         std::to_string(kMaxSocketPath),
                     "choose a shorter directory");
  // gRPC would log its own line for a directory it cannot create the socket in, then fail.
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Error{ErrorCode::io,
                 name,
                 "cannot create a socket in " + dir.string() + ": " + std::strerror(errno),
                 {}};
  struct stat st {};
  if (::lstat(name.c_str(), &st) != 0) {
    if (errno == ENOENT) return Ok{};
    return Error{ErrorCode::io, name, std::string("cannot inspect: ") + std::strerror(errno), {}};
  }
  if (!S_ISSOCK(st.st_mode))
    return bad_input(name,
                     std::string("is ") +
                         (S_ISREG(st.st_mode)   ? "a regular file"
                          : S_ISLNK(st.st_mode) ? "a symbolic link"
                                                : file_type_name(st.st_mode)) +
                         ", not a socket: it is left as it is and nothing can listen there",
                     "remove it, or choose another directory");
  if (::unlink(name.c_str()) != 0 && errno != ENOENT)
    return Error{ErrorCode::io,
                 name,
                 std::string("cannot remove the stale socket: ") + std::strerror(errno),
                 {}};
  return Ok{};
}

}  // namespace polyaccel
