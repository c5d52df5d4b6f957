#include "dra/cdi_driver.h"

#include <elf.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "cdi_hook/ld_cache.h"
#include "core/file_io.h"
#include "core/unique_fd.h"

namespace polyaccel::dra {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kMountOptions = {"ro", "nosuid", "nodev", "rbind", "rprivate"};
const std::vector<std::string> kIpcMountOptions = {"nosuid", "nodev", "rbind", "rprivate",
                                                   "noexec"};

// The toolkit's library search paths (pkg/lookup/library.go), in its order.
const char* const kLibraryDirs[] = {
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu/nvidia/current",
    "/usr/lib/aarch64-linux-gnu/nvidia/current",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/lib/x86_64-linux-gnu/nvidia/current",
    "/lib/aarch64-linux-gnu/nvidia/current",
};
const char* const kBinDirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                "/usr/bin",        "/sbin",          "/bin"};
const char* const kBinaries[] = {"nvidia-smi",
                                 "nvidia-debugdump",
                                 "nvidia-persistenced",
                                 "nvidia-cuda-mps-control",
                                 "nvidia-cuda-mps-server",
                                 "nvidia-imex",
                                 "nvidia-imex-ctl"};
constexpr std::uint64_t kMaxLibraryBytes = 1ull << 30;

struct Found {
  std::string host_path;       // the file itself, every link resolved
  std::string container_path;  // the same, relative to the driver root, with a leading '/'
  struct stat st {};
};

// Files under a driver root, every lookup confined to it.
class DriverRoot {
 public:
  explicit DriverRoot(const std::string& root) {
    std::error_code ec;
    fs::path canon = fs::canonical(root.empty() ? "/" : root, ec);
    if (ec) return;
    real_ = canon.string();
    fd_ = UniqueFd(::open(real_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  }
  bool ok() const { return static_cast<bool>(fd_); }

  std::optional<Found> find(const std::string& path) const {
    std::string rel = path;
    while (!rel.empty() && rel.front() == '/')
      rel.erase(0, 1);
    if (rel.empty() || rel.size() > 4096) return std::nullopt;
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    UniqueFd fd(static_cast<int>(::syscall(SYS_openat2, fd_.get(), rel.c_str(), &how, sizeof how)));
    if (!fd) return std::nullopt;
    Found f;
    if (::fstat(fd.get(), &f.st) != 0) return std::nullopt;
    std::error_code ec;
    fs::path real = fs::read_symlink("/proc/self/fd/" + std::to_string(fd.get()), ec);
    if (ec) return std::nullopt;
    f.host_path = real.string();
    if (real_ == "/") {
      f.container_path = f.host_path;
    } else if (f.host_path.rfind(real_ + "/", 0) == 0) {
      f.container_path = f.host_path.substr(real_.size());
    } else {
      return std::nullopt;  // moved out from under the root meanwhile
    }
    return f;
  }

  // Names in a directory of the root (not resolved: find() each one).
  std::vector<std::string> list(const Found& dir) const {
    std::vector<std::string> out;
    if (!S_ISDIR(dir.st.st_mode)) return out;
    std::error_code ec;
    for (fs::directory_iterator it(dir.host_path, ec), end; !ec && it != end; it.increment(ec)) {
      if (out.size() >= kMaxDirEntries) break;
      out.push_back(it->path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string real_;
  UniqueFd fd_;
};

bool valid_version(const std::string& v) {
  if (v.empty() || v.size() > 32 || !std::isdigit(static_cast<unsigned char>(v.front())) ||
      !std::isdigit(static_cast<unsigned char>(v.back())))
    return false;
  return std::all_of(
             v.begin(), v.end(),
             [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; }) &&
         v.find("..") == std::string::npos && v.find('.') != std::string::npos;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dir_of(const std::string& p) {
  return fs::path(p).parent_path().string();
}
std::string base_of(const std::string& p) {
  return fs::path(p).filename().string();
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

}  // namespace

DriverRoots find_gpu_operator_driver(const std::string& driver_root,
                                     const std::string& host_driver_root) {
  DriverRoots out{driver_root, host_driver_root, false};
  if (driver_root.empty() || !read_nvidia_driver(driver_root).version.empty()) return out;
  const std::string operator_root = (fs::path(driver_root) / "run/nvidia/driver").string();
  if (read_nvidia_driver(operator_root).version.empty()) return out;
  out.driver_root = operator_root;
  out.host_driver_root =
      (fs::path(host_driver_root.empty() ? driver_root : host_driver_root) / "run/nvidia/driver")
          .string();
  out.gpu_operator = true;
  return out;
}

NvidiaDriverFiles read_nvidia_driver(const std::string& driver_root,
                                     const std::string& host_driver_root) {
  NvidiaDriverFiles out;
  out.root = driver_root.empty() ? "/" : driver_root;
  DriverRoot root(out.root);
  if (!root.ok()) {
    out.notes.push_back("driver root " + out.root + ": cannot be opened");
    return out;
  }
  // The library directories that exist, each once (lib64 may be a link to lib).
  std::vector<Found> lib_dirs;
  std::set<std::string> seen_dirs;
  for (const char* d : kLibraryDirs) {
    auto f = root.find(d);
    if (f && S_ISDIR(f->st.st_mode) && seen_dirs.insert(f->host_path).second)
      lib_dirs.push_back(*f);
  }
  // Then the directories the driver root's own ld cache names for libcuda and libnvidia-ml
  // (the toolkit's ldcache locator, its fallback after the search paths).
  if (auto c = root.find("/etc/ld.so.cache");
      c && S_ISREG(c->st.st_mode) && c->st.st_size <= off_t{cdi_hook::kMaxLdCacheBytes}) {
    if (auto text = read_input_file(c->host_path, cdi_hook::kMaxLdCacheBytes, "ld.so.cache")) {
      auto cache = cdi_hook::parse_ld_cache(*text);
      if (!cache.problem.empty())
        out.notes.push_back("driver root " + out.root + ": /etc/ld.so.cache " + cache.problem);
      for (const auto& e : cache.entries) {
        if (e.name.rfind("libcuda.so", 0) != 0 && e.name.rfind("libnvidia-ml.so", 0) != 0) continue;
        if (e.path.empty() || e.path.front() != '/') continue;
        auto f = root.find(fs::path(e.path).parent_path().string());
        if (f && S_ISDIR(f->st.st_mode) && seen_dirs.insert(f->host_path).second)
          lib_dirs.push_back(*f);
      }
    }
  }
  for (const std::string prefix : {"libcuda.so.", "libnvidia-ml.so."}) {
    for (const auto& d : lib_dirs) {
      for (const auto& name : root.list(d)) {
        if (name.rfind(prefix, 0) != 0 || !valid_version(name.substr(prefix.size()))) continue;
        auto f = root.find(d.container_path + "/" + name);
        if (f && S_ISREG(f->st.st_mode)) {
          out.version = name.substr(prefix.size());
          break;
        }
      }
      if (!out.version.empty()) break;
    }
    if (!out.version.empty()) break;
  }
  if (out.version.empty()) {
    out.notes.push_back("driver root " + out.root +
                        ": no libcuda.so.<version> or libnvidia-ml.so.<version> in its library "
                        "directories (is the NVIDIA driver installed there?)");
    return out;
  }
  const std::string suffix = ".so." + out.version;
  std::set<std::string> mounted;
  std::string host_root = host_driver_root;
  while (!host_root.empty() && host_root.back() == '/')
    host_root.pop_back();
  auto mount = [&](const Found& f, const std::vector<std::string>& options) {
    if (!mounted.insert(f.container_path).second) return;
    std::string host = host_driver_root.empty() ? f.host_path : host_root + f.container_path;
    out.mounts.push_back({host, f.container_path, options});
  };

  // Libraries: "*.so.<version>" in each directory holding lib*.so.<version>, and its vdpau/.
  std::vector<Found> libs;
  for (const auto& d : lib_dirs) {
    std::vector<Found> here;
    for (const auto& name : root.list(d)) {
      if (!ends_with(name, suffix) || name.size() == suffix.size()) continue;
      auto f = root.find(d.container_path + "/" + name);
      if (!f) continue;
      if (!S_ISREG(f->st.st_mode) || static_cast<std::uint64_t>(f->st.st_size) > kMaxLibraryBytes) {
        out.notes.push_back(d.container_path + "/" + name + ": not a regular file under 1 GiB");
        continue;
      }
      here.push_back(*f);
    }
    if (here.empty()) continue;
    if (auto vd = root.find(d.container_path + "/vdpau"); vd && S_ISDIR(vd->st.st_mode)) {
      for (const auto& name : root.list(*vd)) {
        if (!ends_with(name, suffix)) continue;
        auto f = root.find(vd->container_path + "/" + name);
        if (f && S_ISREG(f->st.st_mode) &&
            static_cast<std::uint64_t>(f->st.st_size) <= kMaxLibraryBytes)
          here.push_back(*f);
      }
    }
    libs.insert(libs.end(), here.begin(), here.end());
  }
  for (const auto& f : libs) {
    if (mounted.count(f.container_path)) continue;
    mount(f, kMountOptions);
    std::string dir = dir_of(f.container_path), name = base_of(f.container_path);
    if (name.rfind("lib", 0) == 0) add_unique(out.library_dirs, dir);
    // <soname> -> the library, as ldconfig would make it; libcuda.so for programs that link
    // -lcuda at run time (the toolkit's WithDriverDotSoSymlinks).
    UniqueFd fd(::open(f.host_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    struct stat st {};
    if (fd && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode)) {
      auto soname = cdi_hook::elf_soname(fd.get(), static_cast<std::uint64_t>(st.st_size));
      if (soname && *soname != name) add_unique(out.symlinks, name + "::" + dir + "/" + *soname);
    }
    if (name == "libcuda" + suffix)
      add_unique(out.symlinks, "libcuda.so.1::" + dir + "/libcuda.so");
    if (name == "libGLX_nvidia" + suffix)
      add_unique(out.symlinks, name + "::" + dir + "/libGLX_indirect.so.0");
    if (name == "libnvidia-opticalflow" + suffix)
      add_unique(out.symlinks, "libnvidia-opticalflow.so.1::" + dir + "/libnvidia-opticalflow.so");
  }

  // Binaries: the first of each name in the bin directories, a regular executable file.
  for (const char* bin : kBinaries) {
    for (const char* d : kBinDirs) {
      auto f = root.find(std::string(d) + "/" + bin);
      if (!f) continue;
      if (S_ISREG(f->st.st_mode) && (f->st.st_mode & 0111)) {
        mount(*f, kMountOptions);
        break;
      }
    }
  }

  // IPC: the daemons' sockets and the MPS pipe directory, those that exist.
  for (const char* sock : {"nvidia-persistenced/socket", "nvidia-fabricmanager/socket"}) {
    for (const char* run : {"/run/", "/var/run/"}) {
      auto f = root.find(std::string(run) + sock);
      if (f && S_ISSOCK(f->st.st_mode)) {
        mount(*f, kIpcMountOptions);
        break;
      }
    }
  }
  if (auto mps = root.find("/tmp/nvidia-mps"); mps && S_ISDIR(mps->st.st_mode))
    mount(*mps, kIpcMountOptions);

  // GSP firmware of this driver version.
  for (const char* fw : {"/lib/firmware/updates/nvidia/", "/lib/firmware/nvidia/"}) {
    auto d = root.find(std::string(fw) + out.version);
    if (!d || !S_ISDIR(d->st.st_mode)) continue;
    for (const auto& name : root.list(*d)) {
      if (name.rfind("gsp", 0) != 0 || !ends_with(name, ".bin")) continue;
      auto f = root.find(d->container_path + "/" + name);
      if (f && S_ISREG(f->st.st_mode)) mount(*f, kMountOptions);
    }
  }
  return out;
}

std::vector<CdiHook> nvidia_hooks(const NvidiaDriverFiles& driver, const std::string& hook_path) {
  std::vector<CdiHook> out;
  if (hook_path.empty() || driver.empty()) return out;
  if (!driver.symlinks.empty()) {
    CdiHook h;
    h.path = hook_path;
    h.args = {"polyaccel-cdi-hook", "create-symlinks"};
    for (const auto& l : driver.symlinks) {
      h.args.push_back("--link");
      h.args.push_back(l);
    }
    out.push_back(std::move(h));
  }
  if (!driver.library_dirs.empty()) {
    CdiHook h;
    h.path = hook_path;
    h.args = {"polyaccel-cdi-hook", "update-ldcache"};
    for (const auto& d : driver.library_dirs) {
      h.args.push_back("--folder");
      h.args.push_back(d);
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace polyaccel::dra
