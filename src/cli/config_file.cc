#include "cli/config_file.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

#include "core/file_io.h"

namespace polyaccel::cli {
namespace {

// The file's keys, each the long option it stands for (on whichever command has that option).
struct ConfigKey {
  const char* key;
  const char* option;
};
constexpr ConfigKey kKeys[] = {
    {"cpu_dedicated_set", "--cpu-dedicated-set"},
    {"cpu_shared_set", "--cpu-shared-set"},
    {"cpu_allocation_ratio", "--cpu-allocation-ratio"},
    {"ram_allocation_ratio", "--ram-allocation-ratio"},
    {"reserved_memory_per_node", "--reserved-memory-per-node"},
    {"state", "--state"},
    {"listen", "--listen"},
    {"web_config_file", "--web-config-file"},
    {"interval", "--interval"},
    {"otlp_endpoint", "--otlp-endpoint"},
    {"otlp_interval", "--otlp-interval"},
    {"audit_interval", "--audit-interval"},
};

// Option → "FILE:LINE: key" for each value the config file gave (one config per process).
std::map<std::string, std::string>& given_by_file() {
  static std::map<std::string, std::string> given;
  return given;
}
// Option → the value the config file gave it.
std::map<std::string, std::string>& values_from_file() {
  static std::map<std::string, std::string> values;
  return values;
}

std::string key_list() {
  std::string out;
  for (const auto& k : kKeys)
    out += (out.empty() ? "" : ", ") + std::string(k.key);
  return out;
}

std::string at(const std::string& file, const YAML::Mark& mark) {
  return file + ":" + std::to_string(mark.line + 1);
}

// The selected command path: the app, then each selected subcommand down the tree.
std::vector<CLI::App*> selected_path(CLI::App& app) {
  std::vector<CLI::App*> path{&app};
  for (CLI::App* current = &app;;) {
    auto subs = current->get_subcommands();
    if (subs.empty()) break;
    current = subs.front();
    path.push_back(current);
  }
  return path;
}

}  // namespace

void add_config_option(CLI::App* cmd, std::string& path) {
  const CLI::App* parent = cmd->get_parent();
  if (parent && parent->get_name() == "mig") return;
  cmd->add_option("--config", path,
                  std::string("host settings (YAML, docs/config.md; default ") +
                      kDefaultConfigFile + " when it exists)")
      ->type_name("FILE");
}

Status apply_config_file(CLI::App& app, const std::string& given) {
  std::string path = given;
  bool required = !path.empty();
  if (path.empty()) {
    if (const char* env = std::getenv("POLYACCEL_CONFIG"); env && *env) {
      path = env;
      required = true;
    } else {
      path = kDefaultConfigFile;
    }
  }
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    if (!required) return Ok{};
    return bad_input(path, "no such config file", "write it or leave out --config");
  }
  auto text = read_input_file(path, kMaxConfigFileBytes, "config file");
  if (!text) return text.error();
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return bad_input(path + ":" + std::to_string(e.mark.line + 1), "is not YAML: " + e.msg);
  }
  if (root.IsNull()) return Ok{};
  if (!root.IsMap())
    return bad_input(path, "must be a mapping of key: value", "keys: " + key_list());
  auto commands = selected_path(app);
  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
    const ConfigKey* known = nullptr;
    for (const auto& k : kKeys) {
      if (key == k.key) known = &k;
    }
    if (!known) {
      return bad_input(at(path, it->first.Mark()), "unknown key '" + key + "'",
                       "keys: " + key_list());
    }
    if (!it->second.IsScalar()) {
      return bad_input(at(path, it->second.Mark()), key + " must be a single value");
    }
    // The deepest command with this option takes it; a key no selected command has is ignored
    // (the file is the host's, not one command's).
    for (auto c = commands.rbegin(); c != commands.rend(); ++c) {
      CLI::Option* opt = (*c)->get_option_no_throw(known->option);
      if (!opt) continue;
      if (opt->count() > 0) break;  // the command line wins
      try {
        opt->add_result(it->second.Scalar());
        opt->run_callback();
      } catch (const CLI::Error& e) {
        return bad_input(at(path, it->second.Mark()), key + ": " + e.what());
      }
      given_by_file()[known->option] = at(path, it->second.Mark()) + ": " + key;
      values_from_file()[known->option] = it->second.Scalar();
      break;
    }
  }
  return Ok{};
}

std::string option_input(const std::string& option) {
  auto it = given_by_file().find(option);
  return it == given_by_file().end() ? option : it->second;
}

Error with_config_file_input(Error error) {
  for (const auto& [option, value] : values_from_file()) {
    if (error.input.starts_with(given_by_file()[option])) return error;  // named already
  }
  for (const auto& [option, value] : values_from_file()) {
    if (error.input == option || error.input.starts_with(option + " "))
      return with_option_input(std::move(error), option);
    // An error about the file a path option named ("state: /var/lib/x: is a directory").
    if (!value.empty() && error.input == value) {
      error.input = given_by_file()[option] + " " + value;
      return error;
    }
  }
  return error;
}

Error with_option_input(Error error, const std::string& option) {
  const std::string input = option_input(option);
  if (input == option) return error;
  if (error.input == option) {
    error.input = input;
  } else if (error.input.starts_with(option + " ")) {
    error.input = input + error.input.substr(option.size());
  }
  return error;
}

}  // namespace polyaccel::cli
