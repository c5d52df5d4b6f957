// The container runtimes' TOML (toml++) as read_container_runtime_facts reads it: the input is
// both containerd's /etc/containerd/config.toml and CRI-O's /etc/crio/crio.conf of a tree
// (containerd's imports may name them, or globs in the tree).
// Reading never fails: a file that does not parse is a problem naming it (FILE:LINE), one that
// does gives a config version containerd reads (1, 2 or 3); another version is a problem.
#include "discover/container_runtime.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Written directly, not as a FuzzTree: the text may hold NUL bytes, TOML's business to refuse.
  static const std::filesystem::path root = [] {
    auto dir = polyaccel::fuzz::scratch_dir() / "runtime";
    std::filesystem::create_directories(dir / "etc/containerd");
    std::filesystem::create_directories(dir / "etc/crio");
    std::filesystem::create_directories(dir / "usr/bin");
    std::ofstream(dir / "usr/bin/crio") << "";
    return dir;
  }();
  for (const char* file : {"etc/containerd/config.toml", "etc/crio/crio.conf"}) {
    std::ofstream out(root / file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto facts = polyaccel::read_container_runtime_facts(root.string());
  const auto& c = facts.containerd;
  POLYACCEL_FUZZ_CHECK(c.installed && facts.crio.installed);
  if (c.config_path.empty()) {
    POLYACCEL_FUZZ_CHECK(c.problem.rfind("/etc/containerd/config.toml:", 0) == 0);
  } else {
    POLYACCEL_FUZZ_CHECK(c.config_version >= 1 && c.config_version <= 3);
  }
  if (facts.crio.config_path.empty())
    POLYACCEL_FUZZ_CHECK(facts.crio.problem.rfind("/etc/crio/crio.conf:", 0) == 0);
  return 0;
}
