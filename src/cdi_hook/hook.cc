#include "cdi_hook/hook.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "cdi_hook/ld_cache.h"
#include "core/file_io.h"
#include "core/unique_fd.h"

namespace polyaccel::cdi_hook {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

Error io_error(const std::string& input, const std::string& what) {
  return Error{ErrorCode::io, input, what + ": " + std::strerror(errno), {}};
}

enum class Access { read, write };

// `rel` (relative to the container's root, "." for the root itself) opened inside the root.
// A write never crosses a mount point.
int open_in_root(int root_fd, const std::string& rel, int flags, Access access) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve =
      RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (access == Access::write ? RESOLVE_NO_XDEV : 0);
  return static_cast<int>(::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how));
}

std::string relative(const std::vector<std::string>& parts) {
  std::string rel = ".";
  for (const auto& p : parts)
    rel += "/" + p;
  return rel;
}

// Kernel views of the host that an image's link could name: never read from.
bool pseudo_file_system(int fd) {
  struct statfs sfs {};
  if (::fstatfs(fd, &sfs) != 0) return true;
  switch (static_cast<unsigned long>(sfs.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case BPF_FS_MAGIC:
    case DEVPTS_SUPER_MAGIC:
    case EFIVARFS_MAGIC:
      return true;
    default:
      return false;
  }
}

// The directory `parts` (relative to the root) opened O_PATH, made where missing, on the root's
// own file system.
int open_dir_making(int root_fd, const std::vector<std::string>& parts) {
  std::string rel = ".";
  int fd = open_in_root(root_fd, rel, O_PATH | O_DIRECTORY, Access::write);
  for (const auto& p : parts) {
    if (fd < 0) return -1;
    rel += "/" + p;
    int next = open_in_root(root_fd, rel, O_PATH | O_DIRECTORY, Access::write);
    if (next < 0 && errno == ENOENT) {
      if (::mkdirat(fd, p.c_str(), 0755) != 0 && errno != EEXIST) {
        int saved = errno;
        ::close(fd);
        errno = saved;
        return -1;
      }
      next = open_in_root(root_fd, rel, O_PATH | O_DIRECTORY, Access::write);
    }
    int saved = errno;
    ::close(fd);
    errno = saved;
    fd = next;
  }
  return fd;
}

// A regular file inside the root, on no pseudo file system, at most `max_bytes`: opened for
// reading, or -1.
int open_regular(int root_fd, const std::string& rel, std::uint64_t max_bytes,
                 std::uint64_t* size) {
  UniqueFd fd(open_in_root(root_fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, Access::read));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || pseudo_file_system(fd.get()) ||
      static_cast<std::uint64_t>(st.st_size) > max_bytes)
    return -1;
  *size = static_cast<std::uint64_t>(st.st_size);
  return ::dup(fd.get());
}

// The names in the directory opened as `dir_fd` (taken over), at most kMaxFolderEntries, sorted.
std::vector<std::string> entry_names(int dir_fd) {
  std::vector<std::string> out;
  DIR* dir = ::fdopendir(dir_fd);
  if (!dir) {
    ::close(dir_fd);
    return out;
  }
  while (dirent* e = ::readdir(dir)) {
    if (out.size() >= kMaxFolderEntries) break;
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(std::move(name));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

bool is_library_name(const std::string& name) {
  return name.rfind("lib", 0) == 0 && name.find(".so") != std::string::npos;
}

// The libraries of one folder: SONAME -> the path ld.so opens (the SONAME's link in the folder
// when it leads to a regular file, as ldconfig would have made it; else the file itself).
Status scan_folder(int root_fd, const std::string& folder,
                   std::map<std::string, std::string>* out) {
  auto parts = container_path(folder);
  if (!parts) return bad_input("--folder " + folder, "is not an absolute path without '..'");
  const std::string rel = relative(*parts);
  UniqueFd dir(open_in_root(root_fd, rel, O_RDONLY | O_DIRECTORY, Access::read));
  if (!dir) {
    if (errno == ENOENT) return Ok{};  // the spec mounts nothing there in this image
    return io_error("--folder " + folder, "cannot be opened inside the container's root");
  }
  if (pseudo_file_system(dir.get()))
    return bad_input("--folder " + folder, "is on a kernel pseudo file system (proc, sysfs, ...)");
  std::string canonical = folder;
  while (canonical.size() > 1 && canonical.back() == '/')
    canonical.pop_back();
  for (const auto& name : entry_names(::dup(dir.get()))) {
    if (!is_library_name(name) || name.size() > 255) continue;
    std::uint64_t size = 0;
    UniqueFd lib(open_regular(root_fd, rel + "/" + name, kMaxLibraryBytes, &size));
    if (!lib) continue;
    auto soname = elf_soname(lib.get(), size);
    if (!soname || out->count(*soname)) continue;
    std::uint64_t link_size = 0;
    UniqueFd link(open_regular(root_fd, rel + "/" + *soname, kMaxLibraryBytes, &link_size));
    (*out)[*soname] = canonical + "/" + (link ? *soname : name);
  }
  return Ok{};
}

}  // namespace

std::optional<std::vector<std::string>> container_path(const std::string& p) {
  if (p.empty() || p.front() != '/' || p.size() > 4096 || p.find('\0') != std::string::npos)
    return std::nullopt;
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (at < p.size()) {
    std::size_t end = p.find('/', at);
    if (end == std::string::npos) end = p.size();
    std::string s = p.substr(at, end - at);
    at = end + 1;
    if (s.empty()) continue;
    if (s == "." || s == ".." || s.size() > 255) return std::nullopt;
    parts.push_back(std::move(s));
  }
  if (parts.empty()) return std::nullopt;
  return parts;
}

Result<std::string> container_root_from_state(const std::string& state_json) {
  if (state_json.size() > kMaxOciStateBytes) return bad_input("OCI state", "larger than 1 MiB");
  json state = json::parse(state_json, nullptr, false);
  if (!state.is_object() || !state.contains("bundle") || !state["bundle"].is_string())
    return bad_input("OCI state",
                     "not a JSON object with a \"bundle\" string (is this run as a hook?)");
  std::string bundle = state["bundle"];
  if (bundle.empty() || bundle.front() != '/' || bundle.size() > 4096 ||
      bundle.find('\0') != std::string::npos)
    return bad_input("OCI state", "bundle is not an absolute path");
  auto text = read_input_file(fs::path(bundle) / "config.json", kMaxOciConfigBytes, "OCI config");
  if (!text) return text.error();
  json config = json::parse(*text, nullptr, false);
  if (!config.is_object() || !config.contains("root") || !config["root"].is_object() ||
      !config["root"].contains("path") || !config["root"]["path"].is_string())
    return bad_input(bundle + "/config.json", "has no root.path string");
  std::string root = config["root"]["path"];
  if (root.empty() || root.size() > 4096 || root.find('\0') != std::string::npos)
    return bad_input(bundle + "/config.json", "root.path is empty, too long or holds a NUL");
  fs::path p = root.front() == '/' ? fs::path(root) : fs::path(bundle) / root;
  std::error_code ec;
  fs::path canon = fs::canonical(p, ec);
  if (ec || !fs::is_directory(canon, ec))
    return bad_input(p.string(), "the container's root is not a directory");
  if (canon == "/") return bad_input(p.string(), "the container's root is the host's root");
  return canon.string();
}

Status create_symlinks(const std::string& container_root, const std::vector<std::string>& links) {
  UniqueFd root(::open(container_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return io_error(container_root, "cannot open");
  std::vector<std::string> left;
  for (const auto& l : links) {
    auto sep = l.find("::");
    if (sep == std::string::npos || sep == 0 || sep > 4096 || l.find('\0') != std::string::npos)
      return bad_input("--link " + l, "is not TARGET::LINK");
    std::string target = l.substr(0, sep), link = l.substr(sep + 2);
    auto parts = container_path(link);
    if (!parts) return bad_input("--link " + l, "LINK is not an absolute path without '..'");
    std::string name = parts->back();
    parts->pop_back();
    UniqueFd dir(open_dir_making(root.get(), *parts));
    if (!dir) {
      left.push_back(link + " (its directory: " + std::strerror(errno) + ")");
      continue;
    }
    if (::symlinkat(target.c_str(), dir.get(), name.c_str()) == 0) continue;
    if (errno == EEXIST) {
      char buf[4097];
      ssize_t n = ::readlinkat(dir.get(), name.c_str(), buf, sizeof buf - 1);
      if (n >= 0 && std::string(buf, static_cast<size_t>(n)) == target) continue;
      left.push_back(link + " (something else is there)");
    } else {
      left.push_back(link + " (" + std::strerror(errno) + ")");
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

Status update_ldcache(const std::string& container_root, const std::vector<std::string>& folders) {
  if (folders.empty() || folders.size() > 64) return bad_input("--folder", "1 to 64 folders");
  UniqueFd root(::open(container_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return io_error(container_root, "cannot open");
  std::map<std::string, std::string> libraries;
  for (const auto& f : folders) {
    Status st = scan_folder(root.get(), f, &libraries);
    if (!st) return st;
  }
  std::vector<LdCacheEntry> entries;
  for (const auto& [name, path] : libraries)
    entries.push_back(LdCacheEntry{name, path});
  // The image's own entries for every other name.
  std::uint64_t size = 0;
  UniqueFd old(open_regular(root.get(), "./etc/ld.so.cache", kMaxLdCacheBytes, &size));
  if (old) {
    std::string text(static_cast<std::size_t>(size), '\0');
    if (::pread(old.get(), text.data(), text.size(), 0) == static_cast<ssize_t>(text.size())) {
      for (auto& e : parse_ld_cache(text).entries) {
        if (e.hwcap == 0 && !libraries.count(e.name)) entries.push_back(std::move(e));
      }
    }
  }
  const std::string cache = write_ld_cache(std::move(entries));
  UniqueFd etc(open_dir_making(root.get(), {"etc"}));
  if (!etc) return io_error(container_root + " /etc", "cannot be opened on the container's root");
  // O_PATH descriptors cannot be written through; the directory again, for openat and fsync.
  UniqueFd etc_dir(open_in_root(root.get(), "./etc", O_RDONLY | O_DIRECTORY, Access::write));
  if (!etc_dir) return io_error(container_root + " /etc", "cannot be opened");
  // core's write_file_atomically takes a path, which would be resolved on the host: the same
  // steps (temp file, fsync, rename, fsync of the directory) through the confined descriptor.
  const std::string temp = ".ld.so.cache.polyaccel." + std::to_string(::getpid());
  UniqueFd out(::openat(etc_dir.get(), temp.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out) return io_error(container_root + " /etc/" + temp, "cannot be created");
  std::size_t written = 0;
  while (written < cache.size()) {
    ssize_t n = ::write(out.get(), cache.data() + written, cache.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Error e = io_error(container_root + " /etc/" + temp, "cannot be written");
      ::unlinkat(etc_dir.get(), temp.c_str(), 0);
      return e;
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(out.get()) != 0 ||
      ::renameat(etc_dir.get(), temp.c_str(), etc_dir.get(), "ld.so.cache") != 0) {
    Error e = io_error(container_root + " /etc/ld.so.cache", "cannot be replaced");
    ::unlinkat(etc_dir.get(), temp.c_str(), 0);
    return e;
  }
  ::fsync(etc_dir.get());
  return Ok{};
}

}  // namespace polyaccel::cdi_hook
