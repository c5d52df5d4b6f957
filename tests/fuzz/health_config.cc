// HealthPolicy::from_yaml_text: the `health:` section of --health-config.
#include "discover/accel/health.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto policy = polyaccel::HealthPolicy::from_yaml_text(polyaccel::fuzz::as_string(data, size),
                                                        "health.yaml");
  if (!policy) {
    POLYACCEL_FUZZ_CHECK(policy.error().message().find("health.yaml") != std::string::npos);
  }
  return 0;
}
