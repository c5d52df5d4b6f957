#include "core/file_io.h"
#include "core/secret_text.h"
#include "core/socket_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::TempDir;

TEST(FileIo, ReadsSysfsStyleFiles) {
  TempDir dir;
  std::ofstream(dir.path() / "nr_hugepages") << "2048\n";
  std::ofstream(dir.path() / "class") << "0x030200\n";
  std::ofstream(dir.path() / "speed") << "  16.0 GT/s PCIe  \nsecond line\n";
  EXPECT_EQ(read_int_file(dir.path() / "nr_hugepages"), 2048);
  EXPECT_EQ(read_int_file(dir.path() / "class"), 0x030200);
  EXPECT_EQ(read_first_line(dir.path() / "speed"), "16.0 GT/s PCIe");
  EXPECT_FALSE(read_text_file(dir.path() / "absent"));
  EXPECT_FALSE(read_text_file(dir.path()));  // a directory
  EXPECT_FALSE(read_int_file(dir.path() / "speed"));
}

// What a sysfs directory holds, in name order whatever order readdir gives; nothing for a
// directory that is not there.
// issue 40 (4): a key or a token pasted where a path belongs (web config key_file, kubeconfig
// tokenFile, client-key) is never echoed by the error that the file cannot be read.
TEST(FileIo, AKeyOrTokenGivenAsAPathIsNotEchoed) {
  const std::string jwt =
      "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl";
  const std::string pem = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEH\n";
  const std::string token = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpLTE1O";  // 48, mixed
  for (const std::string& secret : {jwt, pem, token, std::string("abcdef.0123456789abcdef")}) {
    EXPECT_TRUE(looks_like_secret(secret)) << secret;
    auto r = read_input_file(secret, 1 << 20, "key file");
    ASSERT_FALSE(r);
    const std::string said = r.error().message();
    EXPECT_EQ(said.find(secret.substr(0, 12)), std::string::npos) << said;
    EXPECT_NE(said.find("looks like a key or a token"), std::string::npos) << said;
  }
  // Paths, UUIDs and digests are named as they are.
  for (const char* path :
       {"/var/lib/kubelet/pods/0f5e6d7c-1234-4abc-9def-0123456789ab/token",
        "/etc/polyaccel/tls/server-2026-12-06.key",
        "sha256-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}) {
    EXPECT_FALSE(looks_like_secret(path)) << path;
    auto r = read_input_file(path, 1 << 20, "key file");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find(path), std::string::npos) << r.error().message();
  }
}

TEST(FileIo, SortedEntryNamesListsFilesDirectoriesAndLinks) {
  TempDir dir;
  std::ofstream(dir.path() / "virtfn10") << "";
  std::filesystem::create_directory(dir.path() / "net");
  std::filesystem::create_symlink("../0000:60:02.3", dir.path() / "virtfn2");
  EXPECT_EQ(sorted_entry_names(dir.path()),
            (std::vector<std::string>{"net", "virtfn10", "virtfn2"}));
  EXPECT_TRUE(sorted_entry_names(dir.path() / "absent").empty());
  EXPECT_TRUE(sorted_entry_names(dir.path() / "virtfn10").empty());  // a file, not a directory
}

TEST(FileIo, IntFilesAreDecimalOrHexAndNeverWrapped) {
  TempDir dir;
  auto value_of = [&](const std::string& text) {
    std::ofstream(dir.path() / "attr", std::ios::trunc) << text;
    return read_int_file(dir.path() / "attr");
  };
  EXPECT_EQ(value_of("-1\n"), -1);   // numa_node of a device without affinity
  EXPECT_EQ(value_of("010\n"), 10);  // decimal, as sysfs means it (strtoll base 0 read 8)
  EXPECT_EQ(value_of("0x10de\n"), 0x10de);
  EXPECT_EQ(value_of("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(value_of("  42  \n"), 42);  // sysfs pads some attributes
  for (const char* bad : {"", "\n", "9223372036854775808", "-9223372036854775809",
                          "0x8000000000000000", "0x", "0x-1", "+1", "1 2", "1e3", "0b1", "x10"}) {
    EXPECT_FALSE(value_of(bad)) << bad;
  }
}

TEST(FileIo, AtomicWriteReplacesWholeFileAndLeavesNoTemporary) {
  TempDir dir;
  auto target = dir.path() / "state.json";
  ASSERT_TRUE(write_file_atomically(target, "first"));
  ASSERT_TRUE(write_file_atomically(target, "second, longer content"));
  EXPECT_EQ(read_text_file(target), "second, longer content");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(FileIo, AtomicWriteIntoMissingDirectoryFailsWithPath) {
  TempDir dir;
  auto target = dir.path() / "no" / "such" / "state.json";
  auto st = write_file_atomically(target, "x");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().input, target.string());
  EXPECT_FALSE(std::filesystem::exists(target));
}

// Every kind of file that is no regular file, and one too large: refused at once with the path
// and what is wrong, never read (a FIFO would block, /dev/zero never ends).
TEST(ReadInputFile, RefusesAllButRegularFilesOfSaneSize) {
  TempDir dir;
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto loop = dir.path() / "loop";
  std::filesystem::create_symlink(loop, loop);
  const auto huge = dir.path() / "huge";
  { std::ofstream(huge) << "x"; }
  std::filesystem::resize_file(huge, std::uint64_t{64} << 20);  // sparse: costs no disk
  const auto socket_path = dir.path() / "sock";
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const auto link_to_fifo = dir.path() / "link";
  std::filesystem::create_symlink(fifo, link_to_fifo);

  struct Case {
    std::filesystem::path path;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {fifo, "is a FIFO, not a regular flavor file"},
      {link_to_fifo, "is a FIFO"},
      {"/dev/zero", "is a character device"},
      {"/dev/urandom", "is a character device"},
      {dir.path(), "is a directory"},
      {loop, "Too many levels of symbolic links"},
      {socket_path, "is a socket"},
      {huge, "is larger than the 1 MiB limit for a flavor file"},
      {dir.path() / "absent", "no such file"},
  };
  for (const auto& c : cases) {
    auto start = std::chrono::steady_clock::now();
    auto r = read_input_file(c.path, kMaxConfigFileBytes, "flavor file");
    ASSERT_FALSE(r) << c.path;
    EXPECT_EQ(r.error().input, c.path.string());
    EXPECT_NE(r.error().message().find(c.problem), std::string::npos) << r.error().message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << c.path;
  }
  ::close(sock);
  EXPECT_EQ(read_input_file(dir.path() / "absent", 10).error().code, ErrorCode::not_found);
  // The kind reads as English whatever it is called ("flavor file file", "a allocation state").
  EXPECT_EQ(read_input_file(fifo, 10, "flavor file").error().problem,
            "is a FIFO, not a regular flavor file");
  EXPECT_EQ(read_input_file(fifo, 10, "allocation state").error().problem,
            "is a FIFO, not a regular allocation state file");
  EXPECT_EQ(read_input_file(huge, 10, "allocation state").error().problem,
            "is larger than the 10 B limit for an allocation state");
}

TEST(ReadInputFile, ReadsUpToTheLimitAndNotPast) {
  TempDir dir;
  const auto file = dir.path() / "f";
  { std::ofstream(file) << std::string(1000, 'a'); }
  EXPECT_EQ(read_input_file(file, 1000)->size(), 1000u);
  EXPECT_FALSE(read_input_file(file, 999));
  // procfs says size 0 and has content: read until EOF, bounded.
  auto status = read_input_file("/proc/self/status", kMaxSystemFileBytes);
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_NE(status->find("Name:"), std::string::npos);
  EXPECT_FALSE(read_text_file("/dev/zero"));  // the sysfs reader is bounded too
}

class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

mode_t mode_of(const std::filesystem::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 07777;
}

TEST(WriteFileAtomically, NewFilesFollowTheUmaskAndOldOnesKeepTheirMode) {
  TempDir dir;
  {
    Umask u(022);
    ASSERT_TRUE(write_file_atomically(dir.path() / "a", "x"));
    EXPECT_EQ(mode_of(dir.path() / "a"), 0644u);
  }
  {
    Umask u(077);
    ASSERT_TRUE(write_file_atomically(dir.path() / "b", "x"));
    EXPECT_EQ(mode_of(dir.path() / "b"), 0600u);
    // Replacing keeps what the file had, whatever the umask now.
    ::chmod((dir.path() / "a").c_str(), 0640);
    ASSERT_TRUE(write_file_atomically(dir.path() / "a", "y"));
    EXPECT_EQ(mode_of(dir.path() / "a"), 0640u);
    EXPECT_EQ(read_text_file(dir.path() / "a"), "y");
  }
}

TEST(WriteFileAtomically, FollowsLinksAndNeverReplacesSpecialFiles) {
  TempDir dir;
  const auto target = dir.path() / "target.xml";
  const auto link = dir.path() / "link.xml";
  { std::ofstream(target) << "old"; }
  std::filesystem::create_symlink("target.xml", link);
  ASSERT_TRUE(write_file_atomically(link, "new"));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(read_text_file(target), "new");
  // A link to a file that does not exist yet: the file is made where the link points.
  const auto dangling = dir.path() / "dangling";
  std::filesystem::create_symlink("made.xml", dangling);
  ASSERT_TRUE(write_file_atomically(dangling, "made"));
  EXPECT_EQ(read_text_file(dir.path() / "made.xml"), "made");
  // A character device is written through, not replaced by a regular file.
  ASSERT_TRUE(write_file_atomically("/dev/null", "discarded"));
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A FIFO with a reader is written through; without one it fails at once instead of hanging.
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(write_file_atomically(fifo, "nobody reads"));
  std::string got;
  std::thread reader([&] {
    int fd = ::open(fifo.c_str(), O_RDONLY);
    char buf[64];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
      got.append(buf, static_cast<size_t>(n));
    ::close(fd);
  });
  Status written = Error{};
  for (int i = 0; i < 200 && !written; ++i) {  // until the reader has opened its end
    written = write_file_atomically(fifo, "through the pipe");
    if (!written) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  reader.join();
  EXPECT_TRUE(written);
  EXPECT_EQ(got, "through the pipe");
  struct stat fst {};
  ASSERT_EQ(::lstat(fifo.c_str(), &fst), 0);
  EXPECT_TRUE(S_ISFIFO(fst.st_mode));
  // A directory is refused, and stays.
  std::filesystem::create_directory(dir.path() / "d");
  auto st_dir = write_file_atomically(dir.path() / "d", "x");
  ASSERT_FALSE(st_dir);
  EXPECT_NE(st_dir.error().message().find("is a directory"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "d"));
  // A loop of links is an error, not a hang.
  std::filesystem::create_symlink("loop", dir.path() / "loop");
  EXPECT_FALSE(write_file_atomically(dir.path() / "loop", "x"));
}

// Before a gRPC server binds: a stale socket is removed; a directory, a file, a FIFO or a link is
// refused and left as it is (issue 29: gRPC logged its own chttp2_server line first); so is a
// path a socket address cannot hold.
TEST(PrepareSocketPath, RemovesOnlyAStaleSocket) {
  TempDir dir;
  const auto sock = dir.path() / "stale.sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(fd);
  EXPECT_TRUE(prepare_socket_path(sock));
  EXPECT_FALSE(std::filesystem::exists(sock));
  EXPECT_TRUE(prepare_socket_path(dir.path() / "absent.sock"));

  std::filesystem::create_directory(dir.path() / "dir.sock");
  std::ofstream(dir.path() / "file.sock") << "x";
  ::mkfifo((dir.path() / "fifo.sock").c_str(), 0600);
  std::filesystem::create_symlink(dir.path() / "absent", dir.path() / "link.sock");
  const std::pair<const char*, const char*> refused[] = {{"dir.sock", "is a directory"},
                                                         {"file.sock", "is a regular file"},
                                                         {"fifo.sock", "is a FIFO"},
                                                         {"link.sock", "is a symbolic link"}};
  for (const auto& [name, problem] : refused) {
    auto st = prepare_socket_path(dir.path() / name);
    ASSERT_FALSE(st) << name;
    EXPECT_EQ(st.error().code, ErrorCode::bad_input);
    EXPECT_NE(st.error().message().find(problem), std::string::npos) << st.error().message();
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::symlink_status(dir.path() / name)))
        << name << " is left as it was";
  }
  auto too_long = prepare_socket_path(dir.path() / (std::string(120, 'x') + ".sock"));
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message().find("a unix socket path holds at most 107"),
            std::string::npos)
      << too_long.error().message();
  auto no_dir = prepare_socket_path(dir.path() / "absent-dir/x.sock");
  ASSERT_FALSE(no_dir);
  EXPECT_NE(no_dir.error().message().find("cannot create a socket in"), std::string::npos);
}

}  // namespace
}  // namespace polyaccel
