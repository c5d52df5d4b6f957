// The command-line conventions people expect of a Unix tool, in one place: --version, one-line
// parse errors, "unknown command" with the closest one, help text without parser internals.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace polyaccel::cli {

// "polyaccel 0.1.0 (commit 2ffc5fa1b2c3, Release)": --version and the agent's build-info metric.
std::string version_text();

// Sets the app's name, -V/--version, the help formatter and one-line parse errors ("polyaccel:
// <what>"). Call on the top-level app before adding subcommands (they inherit it).
void apply_conventions(CLI::App& app);

// argv with each `--name=` (an empty value after '=') split into `--name` and "": CLI11 would
// take the word after it as the value (the DRA DaemonSet's `--kubelet-dir=` swallowed its
// `--nfd-features-dir=...`). Words after a lone `--` are left as they are.
std::vector<std::string> split_empty_values(int argc, const char* const* argv);

// Checks argv against the command tree before CLI11 sees them: an unknown command word gives
// "unknown command 'bogus' (did you mean 'topo'?)", an unknown option of the command "unknown
// option --topolgy (did you mean --topology?)". Returns the message, or "" when every command
// word and long option is known.
std::string unknown_word(const CLI::App& app, int argc, const char* const* argv);

// The one way to give an option a fixed set of values ("auto", "always", "never"): any other value,
// a number included, is refused with "'blue' is not auto, always or never"; completion offers the
// names (one_of_values). `stored` is what each name puts into the option's variable (an enum's
// number; the name itself for a string option).
// `hint`, when given, adds to the refusal of a value ("; --of xml writes hwloc XML").
using ValueHint = std::function<std::string(const std::string& refused)>;
CLI::Option* one_of(CLI::Option* option,
                    const std::vector<std::pair<std::string, std::string>>& names_and_stored,
                    const ValueHint& hint = {});
CLI::Option* one_of(CLI::Option* option, const std::vector<std::string>& names,
                    const ValueHint& hint = {});
template <class Enum>
CLI::Option* one_of(CLI::Option* option, const std::vector<std::pair<std::string, Enum>>& names) {
  std::vector<std::pair<std::string, std::string>> stored;
  for (const auto& [name, value] : names)
    stored.emplace_back(name, std::to_string(static_cast<long long>(value)));
  return one_of(option, stored);
}
// The names one_of gave the option, in their order; empty for any other option.
std::vector<std::string> one_of_values(const CLI::Option* option);

// "a, b or c".
std::string spoken_list(const std::vector<std::string>& words, const std::string& last = "or");

// Refuses an empty value ("--topology ''": a script's unset variable), which would otherwise
// mean "the live host" or "the current directory".
CLI::Option* non_empty(CLI::Option* option);

// Levenshtein distance, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace polyaccel::cli
