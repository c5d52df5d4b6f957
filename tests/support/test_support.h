// Helpers shared by the tests: where the shared fixtures are, temporary folders, running the
// polyaccel binary. Header-only on purpose: tests link nothing extra.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace polyaccel::testing {

inline std::filesystem::path shared_dir() {
  return POLYACCEL_SHARED_DIR;
}
inline std::filesystem::path topology_fixture(const std::string& name) {
  return shared_dir() / "fixtures/topologies" / name;
}
// The capture most tests decide on: a Dell XE8640, two sockets in SNC4 (8 NUMA nodes), 4 H100
// and 4 mlx5 HCAs, three GPUs sharing a PCIe switch with an HCA (fixtures/topologies/README.md).
inline const std::string kXe8640 = "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml";
// kXe8640's path, as the commands' --topology takes it.
inline std::string xe8640_topology() {
  return topology_fixture(kXe8640).string();
}

// A fresh directory under $TMPDIR, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "polyaccel-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Writes `text` to `p`, making its directories: the files of a tree a test builds.
inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// The whole of `p`, empty when it cannot be read: for files a test or its subject wrote.
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Holds an exclusive lock on a file under /tmp for its lifetime (flock): tests of one program
// that ctest runs in parallel and that change, or read, the same state of the live host (its
// hugepage pools) take the same name, and so run one after the other.
class HostStateLock {
 public:
  explicit HostStateLock(const std::string& name) {
    fd_ = ::open(("/tmp/polyaccel-test-" + name + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC,
                 0666);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~HostStateLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  HostStateLock(const HostStateLock&) = delete;
  HostStateLock& operator=(const HostStateLock&) = delete;

 private:
  int fd_ = -1;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout
};

// Runs a shell command line; stdout is captured, stderr too when the command redirects it.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    r.output.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string polyaccel_binary() {
  return POLYACCEL_BINARY;
}

// Extracts a gathered sysfs tarball into `into` and returns the top-level directory it made.
inline std::filesystem::path extract_tarball(const std::filesystem::path& tarball,
                                             const std::filesystem::path& into) {
  auto r = run_command("tar -xjf '" + tarball.string() + "' -C '" + into.string() + "' 2>&1");
  if (r.exit_code != 0) throw std::runtime_error("tar failed: " + r.output);
  for (const auto& e : std::filesystem::directory_iterator(into)) {
    if (e.is_directory()) return e.path();
  }
  throw std::runtime_error("tarball made no directory");
}

}  // namespace polyaccel::testing
