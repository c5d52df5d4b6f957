// parse_sharing_config: the device plugin's time-slicing YAML (--sharing-config), then the
// replication it gives a few devices, as the plugin asks it on every reload.
#include "fuzz_support.h"
#include "share/time_slicing.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto config =
      polyaccel::parse_sharing_config(polyaccel::fuzz::as_string(data, size), "sharing.yaml");
  if (!config) {
    POLYACCEL_FUZZ_CHECK(config.error().message().find("sharing.yaml") != std::string::npos);
  }
  return 0;
}
