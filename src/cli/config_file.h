// The host's config file (/etc/polyaccel/config.yaml, --config FILE): what is the same on every
// call on a host. Each key fills the option of the same meaning of the command being run, unless
// the command line gave that option: flags win. Schema and keys: docs/config.md.
#pragma once

#include <string>

#include "core/error.h"

namespace CLI {
class App;
}

namespace polyaccel::cli {

inline constexpr const char* kDefaultConfigFile = "/etc/polyaccel/config.yaml";

// Adds --config FILE to `cmd`, bound to `path` (mig plan/apply keep -c/--config for mig-parted's
// config name; there $POLYACCEL_CONFIG names the file).
void add_config_option(CLI::App* cmd, std::string& path);

// Reads `path` (or $POLYACCEL_CONFIG, or the default file when it exists) and applies its keys
// to the options of the selected subcommands that the command line left unset. An unknown key,
// a value that is not a scalar, or one the option refuses: an Error naming FILE:LINE.
Status apply_config_file(CLI::App& app, const std::string& path);

// The input a value of `option` came from, for an error about that value: the option itself
// ("--cpu-allocation-ratio"), or "FILE:LINE: key" when the config file gave it.
std::string option_input(const std::string& option);
// An error a lower layer made about `option`'s value ("--listen 127.0.0.1:99999"), its input
// renamed to option_input(option) when the config file gave the value: the file and line, not
// an option nobody typed.
Error with_option_input(Error error, const std::string& option);
// The same for any error that names an option the config file gave, or the value it gave (the
// path of `state:`): what `fail` prints.
Error with_config_file_input(Error error);

}  // namespace polyaccel::cli
