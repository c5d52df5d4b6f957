// apply_config_file: the host's config file (/etc/polyaccel/config.yaml, --config). The app here
// has the options the file's keys fill, with the types and checks main.cc gives them (place's
// CPU sets, ratios and reserved memory; the agent's listen address, web config file, intervals and
// state file).
// The first input byte picks the command; the rest is the file. The file either applies or is
// refused with a message naming it; an option the command line gave keeps its value.
#include <CLI/CLI.hpp>

#include "cli/config_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool agent_selected = data[0] & 1;
  auto path =
      polyaccel::fuzz::scratch_file(polyaccel::fuzz::as_string(data + 1, size - 1), "config.yaml");
  CLI::App app{"fuzz"};
  std::string config_path, state, cpu_dedicated, cpu_shared, reserved;
  double cpu_ratio = 16.0, ram_ratio = 1.5;
  std::string listen = ":9477", interval = "10s", audit_interval = "1m", web_config_file;
  app.add_option("--config", config_path);
  auto* place = app.add_subcommand("place");
  place->add_option("--state", state);
  place->add_option("--cpu-dedicated-set", cpu_dedicated);
  place->add_option("--cpu-shared-set", cpu_shared);
  place->add_option("--cpu-allocation-ratio", cpu_ratio);
  place->add_option("--ram-allocation-ratio", ram_ratio);
  place->add_option("--reserved-memory-per-node", reserved);
  auto* agent = app.add_subcommand("agent");
  agent->add_option("--listen", listen);
  agent->add_option("--web-config-file", web_config_file);
  agent->add_option("--interval", interval);
  agent->add_option("--audit-interval", audit_interval);
  agent->add_option("--state", state);
  // The command line gives the state file: the file's `state` must not replace it.
  std::vector<std::string> args = {agent_selected ? "agent" : "place", "--state", "given"};
  std::reverse(args.begin(), args.end());
  app.parse(args);
  auto applied = polyaccel::cli::apply_config_file(app, path.string());
  if (!applied) {
    POLYACCEL_FUZZ_CHECK(applied.error().message().find(path.string()) != std::string::npos);
    return 0;
  }
  POLYACCEL_FUZZ_CHECK(state == "given");
  return 0;
}
