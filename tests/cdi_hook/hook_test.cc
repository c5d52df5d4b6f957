// polyaccel-cdi-hook (src/cdi_hook): the ld.so.cache it writes read back by Debian's own ldconfig
// and compared, entry for entry, with what ldconfig wrote for this host; the program run in a
// root that holds nothing but itself and the container's files (as on a node without any of
// polyaccel's libraries); and images that try to lead it out of the container (links to host
// paths, "..", /proc/1/root through a mounted /proc, an ld.so.conf.d line, an /etc that is a
// link): nothing outside is read into the cache or written.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cdi_hook/hook.h"
#include "cdi_hook/ld_cache.h"
#include "dra/cdi_hook.h"
#include "support/test_support.h"

namespace polyaccel::cdi_hook {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using polyaccel::testing::read_text;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::write_text;

const char* const kLdconfig = "/sbin/ldconfig";  // Debian's, static: the real reader

}  // namespace

// GoogleTest prints entries so.
void PrintTo(const LdCacheEntry& e, std::ostream* os) {
  *os << to_string(e);
}

namespace {

std::string hook_program() {
  return (fs::path(polyaccel::testing::polyaccel_binary()).parent_path() / "polyaccel-cdi-hook")
      .string();
}

// `ldconfig -p` of a cache file: its lines, as a container's ldconfig -p prints them.
std::string ldconfig_print(const fs::path& cache) {
  return run_command(std::string(kLdconfig) + " -p -C '" + cache.string() + "' 2>&1").output;
}

// A container as runc gives it to the hook: bundle/config.json naming bundle/rootfs.
struct Container {
  explicit Container(const fs::path& base) : bundle(base / "bundle"), rootfs(bundle / "rootfs") {
    fs::create_directories(rootfs / "usr/lib/x86_64-linux-gnu");
    write_text(bundle / "config.json",
               json{{"ociVersion", "1.0.2"}, {"root", {{"path", "rootfs"}}}}.dump());
  }
  // The driver's library as the spec mounts it, and its SONAME link as create-symlinks makes it.
  void add_cuda() {
    fs::copy_file(CUDA_INJECT_LIB, rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15");
  }
  fs::path bundle, rootfs;
};

TEST(LdCache, LibcmpComparesNumbersAsNumbers) {
  EXPECT_GT(ld_cache_libcmp("libfoo.so.10", "libfoo.so.9"), 0);
  EXPECT_LT(ld_cache_libcmp("libfoo.so.9", "libfoo.so.10"), 0);
  EXPECT_EQ(ld_cache_libcmp("libc.so.6", "libc.so.6"), 0);
  EXPECT_LT(ld_cache_libcmp("libc.so", "libc.so.6"), 0);
  EXPECT_GT(ld_cache_libcmp("libd.so", "libc.so.6"), 0);
  EXPECT_GT(ld_cache_libcmp("lib1", "libz"), 0);  // a digit sorts after any other character
  // Numbers too long for glibc's int saturate instead of wrapping.
  EXPECT_EQ(ld_cache_libcmp("lib99999999999999999999", "lib99999999999999999998"), 0);
}

// The host's own cache (written by its ldconfig): every entry read, and written again in the
// same order, which is the order ld.so's binary search needs.
TEST(LdCache, TheHostCacheReadsAndIsWrittenInLdconfigsOrder) {
  auto text = read_text("/etc/ld.so.cache");
  if (text.empty()) GTEST_SKIP() << "this host has no /etc/ld.so.cache";
  LdCache host = parse_ld_cache(text);
  EXPECT_EQ(host.problem, "");
  ASSERT_GT(host.entries.size(), 20u);
  std::vector<LdCacheEntry> base;
  for (const auto& e : host.entries)
    if (e.hwcap == 0) base.push_back(e);
  std::vector<LdCacheEntry> shuffled(base.rbegin(), base.rend());
  const std::string ours = write_ld_cache(shuffled);
  LdCache back = parse_ld_cache(ours);
  EXPECT_EQ(back.problem, "");
  // The same names and flags in the same order (two directories may hold one SONAME: ldconfig
  // keeps those in no particular order).
  ASSERT_EQ(back.entries.size(), base.size());
  for (std::size_t i = 0; i < base.size(); ++i) {
    EXPECT_EQ(back.entries[i].name, base[i].name) << i;
    EXPECT_EQ(back.entries[i].flags, base[i].flags) << i;
  }
  // Debian's ldconfig reads ours as it reads its own: the same lines.
  TempDir d;
  write_text(d.path() / "ours", ours);
  auto theirs = ldconfig_print("/etc/ld.so.cache"), mine = ldconfig_print(d.path() / "ours");
  EXPECT_NE(mine.find(std::to_string(base.size()) + " libs found in cache"), std::string::npos)
      << mine;
  EXPECT_NE(mine.find("libc.so.6 (libc6,x86-64) => "), std::string::npos) << mine;
}

TEST(LdCache, HostileCachesAreReadInLinearTimeAndBounded) {
  // 200,000 entries whose strings all start at one run of 4,000 bytes without a NUL: glibc's
  // PATH_MAX-long strings, each read once would be 800 MB of scanning; the budget stops it.
  std::string cache = write_ld_cache({});
  const std::uint32_t n = 200000;
  std::memcpy(cache.data() + 20, &n, 4);
  const std::uint32_t run = static_cast<std::uint32_t>(48 + std::size_t{24} * n);
  cache.resize(48);
  for (std::uint32_t i = 0; i < n; ++i) {
    char e[24] = {};
    std::int32_t flags = kLdCacheLibraryFlags;
    std::memcpy(e, &flags, 4);
    std::memcpy(e + 4, &run, 4);
    std::memcpy(e + 8, &run, 4);
    cache.append(e, 24);
  }
  cache.append(4000, 'a');
  cache.push_back('\0');
  LdCache c = parse_ld_cache(cache);
  EXPECT_NE(c.problem.find("overlap"), std::string::npos) << c.problem;
  EXPECT_LT(c.entries.size(), n);
  // More entries than the file holds, a string past the end, another format: refused.
  std::string lying = write_ld_cache({{"libx.so.1", "/x"}});
  const std::uint32_t many = 1000000;
  std::memcpy(lying.data() + 20, &many, 4);
  EXPECT_TRUE(parse_ld_cache(lying).entries.empty());
  EXPECT_NE(parse_ld_cache(lying).problem.find("more than fit"), std::string::npos);
  EXPECT_TRUE(parse_ld_cache("ld.so-1.7.0").entries.empty());
  EXPECT_TRUE(parse_ld_cache(std::string(100, '\0')).entries.empty());
  std::string cut = write_ld_cache({{"libx.so.1", "/usr/lib/libx.so.1"}});
  for (std::size_t i = 0; i < cut.size(); ++i)
    EXPECT_LE(parse_ld_cache(cut.substr(0, i)).entries.size(), 0u) << i;
}

TEST(HookProgram, IsStaticAndPassesTheAgentsCheck) {
#ifdef POLYACCEL_HOOK_STATIC
  Status st = dra::check_hook_program(hook_program());
  EXPECT_TRUE(st) << st.error().message();
  auto file = run_command("file -L '" + hook_program() + "'");
  EXPECT_NE(file.output.find("statically linked"), std::string::npos) << file.output;
  // polyaccel itself names a program interpreter: refused, and said why.
  Status dynamic = dra::check_hook_program(polyaccel::testing::polyaccel_binary());
  ASSERT_FALSE(dynamic);
  EXPECT_NE(dynamic.error().problem.find("dynamically linked"), std::string::npos);
#else
  GTEST_SKIP() << "the sanitizer builds link polyaccel-cdi-hook dynamically";
#endif
  TempDir d;
  write_text(d.path() / "script", "#!/bin/sh\necho hello\n");
  fs::permissions(d.path() / "script", fs::perms::owner_all);
  EXPECT_FALSE(dra::check_hook_program((d.path() / "script").string()));
  EXPECT_FALSE(dra::check_hook_program((d.path() / "missing").string()));
}

// On a node whose root holds none of polyaccel's libraries, nor a dynamic loader: the program
// alone, chrooted into a root of only itself and the container's files, makes the links and the
// cache ldconfig then reads.
TEST(HookProgram, RunsInARootOfNothingButItselfAndTheContainer) {
#ifndef POLYACCEL_HOOK_STATIC
  GTEST_SKIP() << "the sanitizer builds link polyaccel-cdi-hook dynamically";
#endif
  if (::geteuid() != 0) GTEST_SKIP() << "chroot needs root";
  TempDir d;
  fs::path node = d.path() / "node";
  Container c(node);
  c.add_cuda();
  fs::copy_file(hook_program(), node / "polyaccel-cdi-hook");
  write_text(d.path() / "state.json", json{{"bundle", "/bundle"}, {"status", "creating"}}.dump());
  auto run = [&](const std::string& args) {
    return run_command("chroot '" + node.string() + "' /polyaccel-cdi-hook " + args + " < '" +
                       (d.path() / "state.json").string() + "' 2>&1");
  };
  auto links =
      run("create-symlinks --link libcuda.so.550.54.15::/usr/lib/x86_64-linux-gnu/libcuda.so.1 "
          "--link libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so");
  ASSERT_EQ(links.exit_code, 0) << links.output;
  auto cache = run("update-ldcache --folder /usr/lib/x86_64-linux-gnu");
  ASSERT_EQ(cache.exit_code, 0) << cache.output;
  EXPECT_EQ(fs::read_symlink(c.rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            "libcuda.so.550.54.15");
  auto printed = ldconfig_print(c.rootfs / "etc/ld.so.cache");
  EXPECT_NE(printed.find("libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            std::string::npos)
      << printed;
  auto bad = run("update-ldcache --folder relative");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--folder relative"), std::string::npos) << bad.output;
  auto unknown = run("frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown command"), std::string::npos) << unknown.output;
}

TEST(Hook, FindsTheContainerRootFromTheOciState) {
  TempDir d;
  Container c(d.path());
  json state = {{"ociVersion", "1.0.2"}, {"id", "c"}, {"pid", 1}, {"bundle", c.bundle.string()}};
  auto r = container_root_from_state(state.dump());
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, fs::canonical(c.rootfs).string());
  EXPECT_FALSE(container_root_from_state("not json"));
  EXPECT_FALSE(container_root_from_state(R"({"bundle": "relative"})"));
  EXPECT_FALSE(container_root_from_state(std::string(kMaxOciStateBytes + 1, ' ')));
  write_text(c.bundle / "config.json", json{{"root", {{"path", "/"}}}}.dump());
  EXPECT_FALSE(container_root_from_state(state.dump()));  // the host's root: refused
  write_text(c.bundle / "config.json", json{{"root", {{"path", "missing"}}}}.dump());
  EXPECT_FALSE(container_root_from_state(state.dump()));
}

TEST(Hook, LinksStayInsideTheContainerRoot) {
  TempDir d;
  fs::path rootfs = d.path() / "rootfs", outside = d.path() / "outside";
  fs::create_directories(rootfs / "usr");
  fs::create_directories(outside);
  // An image whose lib64 points at a host directory: resolved inside the root, never followed out.
  fs::create_symlink(outside, rootfs / "usr/lib64");
  fs::create_symlink("libcuda.so.9", rootfs / "usr/taken.so");
  Status st = create_symlinks(
      rootfs.string(),
      {"libcuda.so.550.54.15::/usr/lib/x86_64-linux-gnu/libcuda.so.1",
       "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so", "x::/usr/lib64/libcuda.so.1",
       "libcuda.so.9::/usr/taken.so", "other::/usr/taken.so"});
  EXPECT_EQ(fs::read_symlink(rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            "libcuda.so.550.54.15");
  EXPECT_EQ(fs::read_symlink(rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so"), "libcuda.so.1");
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_EQ(fs::read_symlink(rootfs / "usr/taken.so"), "libcuda.so.9");
  ASSERT_FALSE(st);  // the lib64 one and the taken one are named
  EXPECT_NE(st.error().problem.find("/usr/taken.so (something else"), std::string::npos);
  for (const std::string bad : {"noseparator", "::/x", "t::relative", "t::/usr/../../etc/x"})
    EXPECT_FALSE(create_symlinks(rootfs.string(), {bad})) << bad;
  EXPECT_FALSE(fs::exists(d.path() / "etc"));
}

// The image's own entries stay, ours are added, and a hostile image cannot lead the hook out.
TEST(Hook, UpdateLdcacheKeepsTheImagesEntriesAndNeverLeavesTheRoot) {
  TempDir d;
  Container c(d.path());
  c.add_cuda();
  ASSERT_TRUE(create_symlinks(c.rootfs.string(),
                              {"libcuda.so.550.54.15::/usr/lib/x86_64-linux-gnu/libcuda.so.1"}));
  // A host directory holding a library, and an image that names it every way it can.
  fs::path host_dir = d.path() / "host-libs";
  fs::create_directories(host_dir);
  fs::copy_file(CUDA_INJECT_LIB, host_dir / "libhost.so.1");
  fs::create_directories(c.rootfs / "etc/ld.so.conf.d");
  write_text(
      c.rootfs / "etc/ld.so.conf.d/evil.conf",
      "/proc/1/root" + host_dir.string() + "\n../../../../../../" + host_dir.string() + "\n");
  write_text(c.rootfs / "etc/ld.so.cache",
             write_ld_cache({{"libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1"},
                             {"libcuda.so.1", "/old/libcuda.so.1"}}));
  fs::create_symlink("../../../../../../../../.." + host_dir.string(), c.rootfs / "usr/lib/dotdot");
  fs::create_symlink(host_dir, c.rootfs / "usr/lib/absolute");
  Status st = update_ldcache(c.rootfs.string(), {"/usr/lib/x86_64-linux-gnu", "/usr/lib/dotdot",
                                                 "/usr/lib/absolute", "/opt/absent"});
  ASSERT_TRUE(st) << st.error().message();
  LdCache cache = parse_ld_cache(read_text(c.rootfs / "etc/ld.so.cache"));
  EXPECT_EQ(cache.problem, "");
  EXPECT_EQ(cache.entries, (std::vector<LdCacheEntry>{
                               {"libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1"},
                               {"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}}));
  EXPECT_EQ(std::distance(fs::directory_iterator(host_dir), fs::directory_iterator()), 1);
  // An /etc that is a link to a host directory: resolved inside the root, where it leads
  // nowhere; nothing is written on the host.
  fs::path host_etc = d.path() / "host-etc";
  fs::create_directories(host_etc);
  fs::rename(c.rootfs / "etc", c.rootfs / "etc.image");
  fs::create_symlink(host_etc, c.rootfs / "etc");
  EXPECT_FALSE(update_ldcache(c.rootfs.string(), {"/usr/lib/x86_64-linux-gnu"}));
  EXPECT_TRUE(fs::is_empty(host_etc));
  // An ld.so.cache that is a link to a host file: the link is replaced, the file untouched.
  fs::remove(c.rootfs / "etc");
  fs::rename(c.rootfs / "etc.image", c.rootfs / "etc");
  write_text(d.path() / "host-cache", "host");
  fs::remove(c.rootfs / "etc/ld.so.cache");
  fs::create_symlink(d.path() / "host-cache", c.rootfs / "etc/ld.so.cache");
  ASSERT_TRUE(update_ldcache(c.rootfs.string(), {"/usr/lib/x86_64-linux-gnu"}));
  EXPECT_EQ(read_text(d.path() / "host-cache"), "host");
  EXPECT_FALSE(fs::is_symlink(c.rootfs / "etc/ld.so.cache"));
  EXPECT_FALSE(update_ldcache(c.rootfs.string(), {"relative"}));
  EXPECT_FALSE(update_ldcache(c.rootfs.string(), {"/usr/../etc"}));
}

// With the container's /proc mounted, as it is when the runtime runs the hook: /proc/1/root
// (the host's root) and the host's /proc files are refused.
TEST(Hook, ProcInsideTheContainerLeadsNowhere) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting /proc needs root";
  TempDir d;
  Container c(d.path());
  c.add_cuda();
  fs::create_directories(c.rootfs / "proc");
  if (::mount("proc", (c.rootfs / "proc").c_str(), "proc", 0, nullptr) != 0)
    GTEST_SKIP() << "cannot mount proc here";
  fs::path host_dir = d.path() / "host-libs";
  fs::create_directories(host_dir);
  fs::copy_file(CUDA_INJECT_LIB, host_dir / "libhost.so.1");
  fs::create_symlink("/proc/1/root" + host_dir.string(), c.rootfs / "usr/lib/via-proc");
  Status magic = update_ldcache(c.rootfs.string(), {"/usr/lib/via-proc"});
  Status pseudo = update_ldcache(c.rootfs.string(), {"/proc/sys/kernel"});
  Status link = create_symlinks(c.rootfs.string(), {"x::/proc/1/root" + host_dir.string() + "/l"});
  ::umount2((c.rootfs / "proc").c_str(), MNT_DETACH);
  EXPECT_FALSE(magic);
  EXPECT_FALSE(pseudo);
  if (!pseudo) {
    EXPECT_NE(pseudo.error().problem.find("pseudo file system"), std::string::npos);
  }
  EXPECT_FALSE(link);
  EXPECT_EQ(std::distance(fs::directory_iterator(host_dir), fs::directory_iterator()), 1);
  EXPECT_FALSE(fs::exists(c.rootfs / "etc/ld.so.cache"));
}

}  // namespace
}  // namespace polyaccel::cdi_hook
