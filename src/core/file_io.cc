#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "core/byte_size.h"
#include "core/number.h"
#include "core/secret_text.h"
#include "core/unique_fd.h"

namespace polyaccel {
namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The path as an error names it: key material or a token pasted where a path belongs is
// withheld (core/secret_text.h), in every error of a file read.
std::string path_named(const std::filesystem::path& path) {
  return shown_or_withheld(path.string());
}

Error file_error(ErrorCode code, const std::filesystem::path& path, std::string problem) {
  return Error{code, path_named(path), std::move(problem), {}};
}

Error errno_error(const std::filesystem::path& path, std::string_view kind, int err) {
  if (err == ENOENT) return file_error(ErrorCode::not_found, path, "no such file");
  return file_error(ErrorCode::io, path,
                    "cannot read " + std::string(kind) + ": " + std::strerror(err));
}

// The kind as a noun that ends in "file" ("flavor file", "allocation state file").
std::string file_noun(std::string_view kind) {
  std::string k(kind);
  return k.size() >= 4 && k.compare(k.size() - 4, 4, "file") == 0 ? k : k + " file";
}

Error not_regular(const std::filesystem::path& path, std::string_view kind, mode_t mode) {
  return bad_input(path_named(path), std::string("is ") + file_type_name(mode) +
                                         ", not a regular " + file_noun(kind));
}

}  // namespace

Result<std::string> read_input_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                    std::string_view kind) {
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) return errno_error(path, kind, errno);
  if (!S_ISREG(before.st_mode)) return not_regular(path, kind, before.st_mode);
  const std::string noun = kind == "file" ? "input file" : std::string(kind);
  std::string too_large =
      "is larger than the " + format_byte_size(max_bytes) + " limit for " +
      (std::string_view("aeiou").find(noun[0]) != std::string_view::npos ? "an " : "a ") + noun;
  if (static_cast<std::uint64_t>(before.st_size) > max_bytes)
    return bad_input(path_named(path), too_large);
  // O_NONBLOCK: should a FIFO be swapped in after stat, open does not wait for a writer.
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (file.get() < 0) return errno_error(path, kind, errno);
  struct stat opened {};
  if (::fstat(file.get(), &opened) != 0) return errno_error(path, kind, errno);
  if (!S_ISREG(opened.st_mode)) return not_regular(path, kind, opened.st_mode);
  std::string content;
  // procfs and some sysfs files say size 0 and have content: read until EOF, bounded.
  content.resize(static_cast<size_t>(
      std::min<std::uint64_t>(max_bytes + 1, std::max<std::int64_t>(opened.st_size, 4096) + 1)));
  size_t used = 0;
  for (;;) {
    if (used == content.size()) {
      if (used > max_bytes) return bad_input(path_named(path), too_large);
      content.resize(static_cast<size_t>(std::min<std::uint64_t>(max_bytes + 1, used * 2)));
    }
    ssize_t n = ::read(file.get(), content.data() + used, content.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(path, kind, errno);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    if (used > max_bytes) return bad_input(path_named(path), too_large);
  }
  content.resize(used);
  return content;
}

std::optional<std::string> read_text_file(const std::filesystem::path& path) {
  auto text = read_input_file(path, kMaxSystemFileBytes);
  if (!text) return std::nullopt;
  return std::move(*text);
}

std::optional<std::string> read_first_line(const std::filesystem::path& path) {
  auto text = read_text_file(path);
  if (!text) return std::nullopt;
  std::string line = text->substr(0, text->find('\n'));
  size_t b = line.find_first_not_of(" \t\r");
  size_t e = line.find_last_not_of(" \t\r");
  if (b == std::string::npos) return std::string{};
  return line.substr(b, e - b + 1);
}

std::optional<std::int64_t> read_int_file(const std::filesystem::path& path) {
  auto line = read_first_line(path);
  if (!line) return std::nullopt;
  // Decimal, or hex after 0x as the kernel prints ids and classes; never octal ("010" is not 8)
  // and never a value past int64 (refused by the one number parser, not wrapped).
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  const std::string_view text = *line;
  if (text.starts_with("0x") || text.starts_with("0X")) {
    auto v = parse_hex(text, path.string(), kMax);
    if (!v) return std::nullopt;
    return static_cast<std::int64_t>(*v);
  }
  auto v = parse_signed(text, path.string(), std::numeric_limits<std::int64_t>::min(), kMax);
  if (!v) return std::nullopt;
  return *v;
}

namespace {

Status write_all(int fd, const std::string& content) {
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{};
    }
    off += static_cast<size_t>(n);
  }
  return Ok{};
}

// A temporary file next to `target`, created with 0666 so that the umask applies as it does to
// any new file (mkstemp would make it 0600 whatever the umask).
int create_temporary(const std::filesystem::path& target, std::string& name) {
  static thread_local std::minstd_rand random(std::random_device{}());
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string suffix;
    for (int i = 0; i < 6; ++i)  // six, as mkstemp: allocation_store.cc finds stale ones by it
      suffix += kChars[random() % (sizeof kChars - 1)];
    name = (dir / ("." + target.filename().string() + "." + suffix)).string();
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

std::vector<std::string> sorted_entry_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::filesystem::path> resolve_links(const std::filesystem::path& path) {
  std::filesystem::path p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    std::filesystem::path target = std::filesystem::read_symlink(p, ec);
    if (ec) return Error{ErrorCode::io, path.string(), "cannot read the link: " + ec.message(), {}};
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  return Error{ErrorCode::io, path.string(), std::strerror(ELOOP), {}};
}

Status write_file_atomically(const std::filesystem::path& requested, const std::string& content,
                             std::optional<unsigned> mode) {
  auto fail = [&](const std::string& what) {
    return Error{ErrorCode::io, requested.string(), what + ": " + std::strerror(errno), {}};
  };
  auto resolved = resolve_links(requested);
  if (!resolved) return resolved.error();
  const std::filesystem::path& path = *resolved;
  struct stat existing {};
  bool exists = ::stat(path.c_str(), &existing) == 0;
  if (exists && !S_ISREG(existing.st_mode)) {
    if (!S_ISCHR(existing.st_mode) && !S_ISFIFO(existing.st_mode))
      return bad_input(requested.string(), std::string("is ") + file_type_name(existing.st_mode) +
                                               ", not a file to write");
    // /dev/null, /dev/stdout, a pipe: written through; renaming over it would destroy the node.
    // O_NONBLOCK: a FIFO nobody reads fails at once (ENXIO) instead of hanging.
    UniqueFd out(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (out.get() < 0) return fail("cannot open");
    ::fcntl(out.get(), F_SETFL, ::fcntl(out.get(), F_GETFL) & ~O_NONBLOCK);
    if (!write_all(out.get(), content)) return fail("cannot write");
    return Ok{};
  }
  std::string tmp;
  int fd = create_temporary(path, tmp);
  if (fd < 0) return fail("cannot create a temporary file");
  // Replacing a file keeps its permissions (a state file other readers may read), unless the
  // caller names the mode.
  if (mode)
    ::fchmod(fd, static_cast<mode_t>(*mode & 07777));
  else if (exists)
    ::fchmod(fd, existing.st_mode & 07777);
  if (!write_all(fd, content)) {
    Error e = fail("cannot write");
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Error e = fail("cannot flush");
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = fail("cannot rename into place");
    ::unlink(tmp.c_str());
    return e;
  }
  std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Ok{};
}

}  // namespace polyaccel
