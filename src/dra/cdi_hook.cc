#include "dra/cdi_hook.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace polyaccel::dra {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Error bad(const std::string& input, const std::string& problem) {
  return Error{ErrorCode::bad_input, input, problem, {}};
}

// An absolute path in the container, without "." or ".." components or NULs: its components.
std::optional<std::vector<std::string>> container_path(const std::string& p) {
  if (p.empty() || p.front() != '/' || p.size() > 4096 || p.find('\0') != std::string::npos)
    return std::nullopt;
  std::vector<std::string> parts;
  for (const auto& c : fs::path(p)) {
    std::string s = c.string();
    if (s == "/" || s.empty()) continue;
    if (s == "." || s == ".." || s.size() > 255) return std::nullopt;
    parts.push_back(s);
  }
  if (parts.empty()) return std::nullopt;
  return parts;
}

int open_in_root(int root_fd, const std::string& rel, int flags) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how));
}

// The directory `parts` (relative to the root) opened O_PATH, made where missing.
int open_dir_making(int root_fd, const std::vector<std::string>& parts) {
  std::string rel = ".";
  int fd = open_in_root(root_fd, rel, O_PATH | O_DIRECTORY);
  for (const auto& p : parts) {
    if (fd < 0) return -1;
    rel += "/" + p;
    int next = open_in_root(root_fd, rel, O_PATH | O_DIRECTORY);
    if (next < 0 && errno == ENOENT) {
      if (::mkdirat(fd, p.c_str(), 0755) != 0 && errno != EEXIST) {
        ::close(fd);
        return -1;
      }
      next = open_in_root(root_fd, rel, O_PATH | O_DIRECTORY);
    }
    ::close(fd);
    fd = next;
  }
  return fd;
}

}  // namespace

Result<std::string> container_root_from_state(const std::string& state_json) {
  if (state_json.size() > kMaxOciStateBytes) return bad("OCI state", "larger than 1 MiB");
  json state = json::parse(state_json, nullptr, false);
  if (!state.is_object() || !state.contains("bundle") || !state["bundle"].is_string())
    return bad("OCI state", "not a JSON object with a \"bundle\" string (is this run as a hook?)");
  std::string bundle = state["bundle"];
  if (bundle.empty() || bundle.front() != '/' || bundle.size() > 4096)
    return bad("OCI state", "bundle is not an absolute path");
  auto text = read_input_file(fs::path(bundle) / "config.json", kMaxOciConfigBytes, "OCI config");
  if (!text) return text.error();
  json config = json::parse(*text, nullptr, false);
  if (!config.is_object() || !config.contains("root") || !config["root"].is_object() ||
      !config["root"].contains("path") || !config["root"]["path"].is_string())
    return bad(bundle + "/config.json", "has no root.path string");
  std::string root = config["root"]["path"];
  if (root.empty() || root.size() > 4096) return bad(bundle + "/config.json", "root.path empty");
  fs::path p = root.front() == '/' ? fs::path(root) : fs::path(bundle) / root;
  std::error_code ec;
  fs::path canon = fs::canonical(p, ec);
  if (ec || !fs::is_directory(canon, ec))
    return bad(p.string(), "the container's root is not a directory");
  if (canon == "/") return bad(p.string(), "the container's root is the host's root");
  return canon.string();
}

Status create_symlinks(const std::string& container_root, const std::vector<std::string>& links) {
  Fd root(::open(container_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.fd < 0)
    return Error{ErrorCode::io, container_root, std::string("cannot open: ") + strerror(errno), {}};
  std::vector<std::string> left;
  for (const auto& l : links) {
    auto sep = l.find("::");
    if (sep == std::string::npos || sep == 0 || sep > 4096 || l.find('\0') != std::string::npos)
      return bad("--link " + l, "is not TARGET::LINK");
    std::string target = l.substr(0, sep), link = l.substr(sep + 2);
    auto parts = container_path(link);
    if (!parts) return bad("--link " + l, "LINK is not an absolute path without '..'");
    std::string name = parts->back();
    parts->pop_back();
    Fd dir(open_dir_making(root.fd, *parts));
    if (dir.fd < 0) {
      left.push_back(link + " (its directory: " + strerror(errno) + ")");
      continue;
    }
    if (::symlinkat(target.c_str(), dir.fd, name.c_str()) == 0) continue;
    if (errno == EEXIST) {
      char buf[4097];
      ssize_t n = ::readlinkat(dir.fd, name.c_str(), buf, sizeof buf - 1);
      if (n >= 0 && std::string(buf, static_cast<size_t>(n)) == target) continue;
      left.push_back(link + " (something else is there)");
    } else {
      left.push_back(link + " (" + strerror(errno) + ")");
    }
  }
  if (!left.empty()) {
    std::string s;
    for (const auto& x : left)
      s += (s.empty() ? "" : ", ") + x;
    return Error{ErrorCode::io, container_root, "links not made: " + s, {}};
  }
  return Ok{};
}

Status update_ldcache(const std::string& container_root, const std::vector<std::string>& folders,
                      const std::string& ldconfig_path) {
  if (folders.empty() || folders.size() > 64) return bad("--folder", "1 to 64 folders");
  std::string conf;
  for (const auto& f : folders) {
    if (!container_path(f) || f.find('\n') != std::string::npos)
      return bad("--folder " + f, "is not an absolute path without '..'");
    conf += f + "\n";
  }
  Fd exe(::open(ldconfig_path.c_str(), O_PATH | O_CLOEXEC));
  struct stat st {};
  if (exe.fd < 0 || ::fstat(exe.fd, &st) != 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
    return Error{ErrorCode::not_found, ldconfig_path, "is not an executable file on the host",
                 "give the host's ldconfig with --ldconfig-path"};
  }
  // Everything the child needs, made before fork: it runs only system calls.
  std::vector<std::string> args = {"ldconfig", "-f", "/etc/ld.so.conf", "-C", "/etc/ld.so.cache"};
  args.insert(args.end(), folders.begin(), folders.end());
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path_env, nullptr};
  const std::string include = "include /etc/ld.so.conf.d/*.conf\n";
  pid_t pid = ::fork();
  if (pid < 0) return Error{ErrorCode::io, "fork", strerror(errno), {}};
  if (pid == 0) {
    if (::chroot(container_root.c_str()) != 0 || ::chdir("/") != 0) ::_exit(120);
    // chroot keeps every path in the container's files, but a directory the spec mounts from
    // the host (/tmp/nvidia-mps is writable) is among them: an /etc or ld.so.conf.d that is a
    // link could lead the writes there. Only real directories are written in.
    struct stat ls {};
    ::mkdir("/etc", 0755);
    if (::lstat("/etc", &ls) != 0 || !S_ISDIR(ls.st_mode)) ::_exit(123);
    ::mkdir("/etc/ld.so.conf.d", 0755);
    if (::lstat("/etc/ld.so.conf.d", &ls) != 0 || !S_ISDIR(ls.st_mode)) ::_exit(123);
    int c = ::open("/etc/ld.so.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (c >= 0) {
      if (::write(c, include.data(), include.size()) < 0) ::_exit(121);
      ::close(c);
    }
    int d = ::open("/etc/ld.so.conf.d/00-polyaccel-cdi.conf",
                   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (d >= 0) {
      if (::write(d, conf.data(), conf.size()) < 0) ::_exit(121);
      ::close(d);
    }
    ::syscall(SYS_execveat, exe.fd, "", argv.data(), envp, AT_EMPTY_PATH);
    ::_exit(122);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Ok{};
  std::string why = !WIFEXITED(status)           ? "was killed"
                    : WEXITSTATUS(status) == 120 ? "cannot chroot into the container's root"
                    : WEXITSTATUS(status) == 121 ? "cannot write /etc/ld.so.conf.d in it"
                    : WEXITSTATUS(status) == 123
                        ? "its /etc or /etc/ld.so.conf.d is not a directory (a link?): not written"
                    : WEXITSTATUS(status) == 122
                        ? "cannot be run in the container's root (not a static executable?)"
                        : "exited with " + std::to_string(WEXITSTATUS(status));
  return Error{ErrorCode::io, ldconfig_path + " in " + container_root, why, {}};
}

std::string self_path() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

Status install_hook_binary(const std::string& path) {
  if (path.empty() || path.front() != '/') return bad("--cdi-hook-path " + path, "not absolute");
  std::string self = self_path();
  std::error_code ec;
  if (self.empty()) return Error{ErrorCode::io, "/proc/self/exe", "cannot be read", {}};
  if (fs::equivalent(self, path, ec)) return Ok{};
  auto mine = read_input_file(self, 1ull << 30, "running binary");
  if (!mine) return mine.error();
  if (fs::is_regular_file(path, ec)) {
    auto theirs = read_input_file(path, 1ull << 30, "hook binary");
    if (theirs && *theirs == *mine) return Ok{};
  }
  fs::create_directories(fs::path(path).parent_path(), ec);
  return write_file_atomically(path, *mine, 0755);
}

}  // namespace polyaccel::dra
