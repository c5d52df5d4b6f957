#include "core/log.h"

#include <unistd.h>

#include <cerrno>
#include <string>

#include "core/strings.h"

namespace polyaccel {

void log_line(std::string_view line) {
  std::string text = printable(line);
  text += '\n';
  const char* at = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to log to: nothing else to do about it
    at += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace polyaccel
