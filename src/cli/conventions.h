// The command-line conventions people expect of a Unix tool, in one place: --version, one-line
// parse errors, "unknown command" with the closest one, help text without parser internals.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace polyaccel::cli {

// "polyaccel 0.1.0 (commit 2ffc5fa1b2c3, Release)": --version and the agent's build-info metric.
std::string version_text();

// Sets the app's name, -V/--version, the help formatter and one-line parse errors ("polyaccel:
// <what>"). Call on the top-level app before adding subcommands (they inherit it).
void apply_conventions(CLI::App& app);

// Checks the leading words of argv against the subcommand tree before CLI11 sees them: an unknown
// command word gives "unknown command 'bogus' (did you mean 'topo'?)". Returns the message, or ""
// when argv names no unknown command.
std::string unknown_command(const CLI::App& app, int argc, const char* const* argv);

// Levenshtein distance, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace polyaccel::cli
