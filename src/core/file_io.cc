#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace polyaccel {

std::optional<std::string> read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
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
  if (!line || line->empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(line->c_str(), &end, 0);
  if (errno != 0 || end == line->c_str() || *end != '\0') return std::nullopt;
  return v;
}

Status write_file_atomically(const std::filesystem::path& path, const std::string& content,
                             std::optional<unsigned> mode) {
  auto fail = [&](const std::string& what) {
    return Error{ErrorCode::io, path.string(), what + ": " + std::strerror(errno), {}};
  };
  std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  std::string tmpl = (dir / ("." + path.filename().string() + ".XXXXXX")).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return fail("cannot create a temporary file");
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      Error e = fail("cannot write");
      ::close(fd);
      ::unlink(tmpl.c_str());
      return e;
    }
    off += static_cast<size_t>(n);
  }
  if (mode && ::fchmod(fd, static_cast<mode_t>(*mode & 07777)) != 0) {
    Error e = fail("cannot set the mode");
    ::close(fd);
    ::unlink(tmpl.c_str());
    return e;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Error e = fail("cannot flush");
    ::unlink(tmpl.c_str());
    return e;
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    Error e = fail("cannot rename into place");
    ::unlink(tmpl.c_str());
    return e;
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Ok{};
}

}  // namespace polyaccel
