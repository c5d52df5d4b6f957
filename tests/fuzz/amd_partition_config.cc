// parse_amd_partition_config: AMD Device Config Manager's config.json (the ConfigMap the agent's
// --amd-partition-manager reads), then every profile selected for 1..16 GPUs.
#include "share/amd_partition_config.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto config =
      polyaccel::parse_amd_partition_config(polyaccel::fuzz::as_string(data, size), "config.json");
  if (!config) {
    POLYACCEL_FUZZ_CHECK(!config.error().message().empty());
    return 0;
  }
  for (const auto& [name, profile] : config->profiles) {
    for (std::size_t gpus = 1; gpus <= 16; ++gpus) {
      auto targets = polyaccel::select_amd_partition_profile(*config, name, gpus);
      if (targets) POLYACCEL_FUZZ_CHECK(targets->size() == gpus);
    }
  }
  return 0;
}
