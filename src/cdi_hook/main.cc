// polyaccel-cdi-hook: the createContainer hooks of polyaccel's CDI specs (hook.h), one small
// program linked statically (no shared library, no dynamic loader), because the runtime runs it
// with the node's own root, which holds none of polyaccel's libraries (a stock Ubuntu, RHEL or
// Debian node). The agent installs it on the host (docs/dra.md).
//
//   polyaccel-cdi-hook create-symlinks --link TARGET::LINK ...   (OCI state on stdin)
//   polyaccel-cdi-hook update-ldcache --folder DIR ...           (OCI state on stdin)
//   polyaccel-cdi-hook version
//
// Exit status: 0 done, 2 bad input or failure (said on stderr, which the runtime reports).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "cdi_hook/hook.h"
#include "core/strings.h"

namespace {

constexpr const char* kUsage =
    "usage: polyaccel-cdi-hook create-symlinks --link TARGET::LINK ...\n"
    "       polyaccel-cdi-hook update-ldcache --folder DIR ...\n"
    "       polyaccel-cdi-hook version\n"
    "The OCI state of the container is read from stdin (run by the container runtime as a\n"
    "createContainer hook of a CDI spec).\n";

int fail(const polyaccel::Error& e) {
  std::string m = "polyaccel-cdi-hook: " + polyaccel::printable(e.message()) + "\n";
  ssize_t ignored = ::write(2, m.data(), m.size());
  (void)ignored;
  return 2;
}

int usage(const std::string& problem) {
  std::string m = "polyaccel-cdi-hook: " + polyaccel::printable(problem) + "\n" + kUsage;
  ssize_t ignored = ::write(2, m.data(), m.size());
  (void)ignored;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace polyaccel;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage("no command");
  const std::string command = args[0];
  if (command == "version" || command == "--version") {
    std::printf("polyaccel-cdi-hook %s\n", POLYACCEL_VERSION);
    return 0;
  }
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string flag = command == "create-symlinks"  ? "--link"
                           : command == "update-ldcache" ? "--folder"
                                                         : "";
  if (flag.empty()) return usage("unknown command '" + command + "'");
  std::vector<std::string> values;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) {
      values.push_back(args[++i]);
    } else if (args[i].rfind(flag + "=", 0) == 0) {
      values.push_back(args[i].substr(flag.size() + 1));
    } else {
      return usage(command + ": unexpected argument '" + args[i] + "'");
    }
  }
  std::string state;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    state.append(buf, static_cast<std::size_t>(n));
    if (state.size() > cdi_hook::kMaxOciStateBytes)
      return fail(Error{ErrorCode::bad_input, "OCI state on stdin", "larger than 1 MiB", {}});
  }
  auto root = cdi_hook::container_root_from_state(state);
  if (!root) return fail(root.error());
  Status st = command == "create-symlinks" ? cdi_hook::create_symlinks(*root, values)
                                           : cdi_hook::update_ldcache(*root, values);
  if (!st) return fail(st.error());
  return 0;
}
