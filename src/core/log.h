// The agent's log: one line on stderr, written whole. The agent's threads (monitor, exporter,
// device plugin, DRA driver, partition manager) log at the same moments; stderr is unbuffered, so
// a line written piece by piece (each `std::cerr <<` is its own write) interleaves with another
// thread's mid-line.
#pragma once

#include <string_view>

namespace polyaccel {

// Writes `line` and a newline with one write(2) (lines up to PIPE_BUF, 4096 bytes, reach a pipe
// or a journal socket unbroken by other writers). The line is made printable() first: what it
// quotes (an API server's answer, a path) cannot start a forged line of its own.
void log_line(std::string_view line);

}  // namespace polyaccel
