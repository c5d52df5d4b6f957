// parse_mig_parted_config: NVIDIA mig-parted's config YAML (`mig plan/apply -f FILE`).
#include "share/mig_parted_config.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto config =
      polyaccel::parse_mig_parted_config(polyaccel::fuzz::as_string(data, size), "mig.yaml");
  if (!config) POLYACCEL_FUZZ_CHECK(!config.error().message().empty());
  return 0;
}
