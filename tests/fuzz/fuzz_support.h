// Shared by the libFuzzer targets of tests/fuzz (one file per parser, named after it). Each target
// defines LLVMFuzzerTestOneInput; the clang ASan build links libFuzzer, the plain build links
// replay_main.cc, which runs the target over its seed corpus as a regression test.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace polyaccel::fuzz {

inline std::string as_string(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// An invariant the parser promised and broke: abort, so libFuzzer keeps the input.
#define POLYACCEL_FUZZ_CHECK(condition)                                                           \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                               \
    }                                                                                             \
  } while (0)

// One scratch directory per process, removed at exit: under $TMPDIR, else in memory (/dev/shm)
// where there is one, since the tree targets write a tree per input (several times faster there).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::error_code ec;
    std::string base = tmp && *tmp                                     ? tmp
                       : std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm"
                                                                       : "/tmp";
    std::string pattern = base + "/polyaccel-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    static struct Cleanup {
      std::filesystem::path path;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
      }
    } cleanup{pattern};
    return std::filesystem::path(pattern);
  }();
  return dir;
}

// A file tree built from the fuzz input, for the sysfs/procfs readers (each reads through a root).
// The input is a list of records separated by NUL bytes; a record is "relative/path\ncontent"
// (a regular file), "relative/dir/" (an empty directory) or "relative/path -> target" (a symbolic
// link). Paths that would leave the
// tree (absolute, "..") are skipped, as are links whose target resolves outside it, so a run
// never reads the fuzzing machine's own files. tests/fuzz/pack_tree.py packs a real tree so.
class FuzzTree {
 public:
  static constexpr std::size_t kMaxRecords = 256;

  explicit FuzzTree(std::string_view input) : root_(scratch_dir() / "tree") {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
    std::filesystem::create_directories(root_, ec);
    std::size_t records = 0;
    while (!input.empty() && records++ < kMaxRecords) {
      std::size_t end = input.find('\0');
      std::string_view record = input.substr(0, end);
      input = end == std::string_view::npos ? std::string_view{} : input.substr(end + 1);
      add(record);
    }
    remove_links_out_of_tree();
  }
  const std::filesystem::path& root() const { return root_; }

 private:
  // The path inside the tree, or empty when `relative` would leave it.
  std::filesystem::path inside(std::string_view relative) const {
    std::filesystem::path rel{std::string(relative)};
    if (relative.empty() || rel.is_absolute()) return {};
    for (const auto& part : rel) {
      if (part == "..") return {};
    }
    return root_ / rel;
  }

  // A link may resolve out of the tree through other links ("a -> ." then "b -> a/../.."):
  // check where each one really leads once all exist, and drop those that leave or loop.
  void remove_links_out_of_tree() {
    std::error_code ec;
    const std::string inside_root = std::filesystem::canonical(root_, ec).string() + "/";
    for (int pass = 0; pass < 4; ++pass) {
      std::vector<std::filesystem::path> bad;
      for (auto it = std::filesystem::recursive_directory_iterator(root_, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_symlink(ec)) continue;
        std::error_code resolve_ec;
        auto target = std::filesystem::weakly_canonical(it->path(), resolve_ec).string() + "/";
        if (resolve_ec || target.rfind(inside_root, 0) != 0) bad.push_back(it->path());
      }
      if (bad.empty()) return;
      for (const auto& link : bad)
        std::filesystem::remove(link, ec);
    }
  }

  void add(std::string_view record) {
    std::error_code ec;
    std::size_t newline = record.find('\n');
    std::string_view head = record.substr(0, newline);
    std::size_t arrow = head.find(" -> ");
    if (arrow != std::string_view::npos) {
      std::filesystem::path link = inside(head.substr(0, arrow));
      std::filesystem::path target{std::string(head.substr(arrow + 4))};
      if (link.empty() || target.empty() || target.is_absolute()) return;
      auto resolved = (link.parent_path() / target).lexically_normal().string();
      if (resolved.rfind(root_.string(), 0) != 0) return;  // would point out of the tree
      std::filesystem::create_directories(link.parent_path(), ec);
      std::filesystem::create_symlink(target, link, ec);
      return;
    }
    std::filesystem::path file = inside(head);
    if (file.empty()) return;
    if (head.back() == '/') {  // an empty directory ("net/ib0/")
      std::filesystem::create_directories(file, ec);
      return;
    }
    std::filesystem::create_directories(file.parent_path(), ec);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (newline != std::string_view::npos) {
      std::string_view content = record.substr(newline + 1);
      out.write(content.data(), static_cast<std::streamsize>(content.size()));
    }
  }

  std::filesystem::path root_;
};

// The input written to one scratch file, for the parsers that take a path (hwloc's XML loader).
inline std::filesystem::path scratch_file(std::string_view content, const std::string& name) {
  std::filesystem::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  return path;
}

}  // namespace polyaccel::fuzz
