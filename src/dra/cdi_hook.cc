#include "dra/cdi_hook.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/file_io.h"
#include "core/unique_fd.h"

namespace polyaccel::dra {

namespace {

namespace fs = std::filesystem;

#if defined(__x86_64__)
constexpr unsigned kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kMachine = EM_AARCH64;
#endif
constexpr std::uint64_t kMaxHookBytes = std::uint64_t{64} << 20;

Error hook_error(const std::string& path, const std::string& problem) {
  return Error{ErrorCode::unsupported, path, problem,
               "install the polyaccel-cdi-hook of this release there (--cdi-hook-path, "
               "docs/dra.md)"};
}

}  // namespace

std::string self_path() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

std::string default_hook_path() {
  std::string self = self_path();
  if (self.empty()) return kHookProgramName;
  return (fs::path(self).parent_path() / kHookProgramName).string();
}

Status install_hook_program(const std::string& source, const std::string& dest) {
  if (dest.empty() || dest.front() != '/')
    return bad_input("--cdi-hook-path " + dest, "is not an absolute path");
  std::error_code ec;
  if (fs::equivalent(source, dest, ec)) return Ok{};
  auto mine = read_input_file(source, kMaxHookBytes, "CDI hook program");
  if (!mine) return mine.error();
  if (fs::is_regular_file(dest, ec)) {
    auto theirs = read_input_file(dest, kMaxHookBytes, "installed CDI hook program");
    if (theirs && *theirs == *mine) return Ok{};
  }
  fs::create_directories(fs::path(dest).parent_path(), ec);
  return write_file_atomically(dest, *mine, 0755);
}

Status check_hook_program(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0)
    return hook_error(path, std::string("cannot be opened: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111))
    return hook_error(path, "is not an executable regular file");
  Elf64_Ehdr eh{};
  if (::pread(fd.get(), &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != kMachine || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256)
    return hook_error(path, "is not an ELF executable for this machine");
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  const std::size_t bytes = ph.size() * sizeof(Elf64_Phdr);
  if (eh.e_phoff > static_cast<std::uint64_t>(st.st_size) ||
      ::pread(fd.get(), ph.data(), bytes, static_cast<off_t>(eh.e_phoff)) !=
          static_cast<ssize_t>(bytes))
    return hook_error(path, "has a truncated ELF program header table");
  for (const auto& p : ph) {
    if (p.p_type == PT_INTERP)
      return hook_error(path,
                        "is dynamically linked (it names a program interpreter): the runtime runs "
                        "it with the node's libraries, which may lack its own");
  }
  // Run it as the runtime will: `version`, no environment, output read with a deadline.
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Error{ErrorCode::io, "pipe", std::strerror(errno), {}};
  UniqueFd read_end(out[0]), write_end(out[1]);
  std::string p = path;
  char arg0[] = "polyaccel-cdi-hook";
  char arg1[] = "version";
  char* argv[] = {arg0, arg1, nullptr};
  char* envp[] = {nullptr};
  pid_t pid = ::fork();
  if (pid < 0) return Error{ErrorCode::io, "fork", std::strerror(errno), {}};
  if (pid == 0) {
    ::dup2(write_end.get(), 1);
    ::execve(p.c_str(), argv, envp);
    ::_exit(errno == EACCES ? 126 : 127);
  }
  write_end = UniqueFd();
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    pollfd pfd{read_end.get(), POLLIN, 0};
    if (left <= 0 || ::poll(&pfd, 1, static_cast<int>(left)) == 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    char buf[256];
    ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() > 4096) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
    return hook_error(path, "cannot be executed here (permission denied: a noexec mount?)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return hook_error(path, "did not run: `version` " +
                                (WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                                                   : std::string("was killed or timed out")));
  if (text.rfind(std::string(kHookProgramName) + " ", 0) != 0)
    return hook_error(path, "is not polyaccel-cdi-hook (its `version` says something else)");
  return Ok{};
}

}  // namespace polyaccel::dra
