// parse_flavor_file: `openstack flavor show -f json` output (properties as a dict or Nova's
// "key='value'" string) or our own YAML; then the request it makes, as `place --flavor` does.
#include "place/flavor_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto flavor =
      polyaccel::place::parse_flavor_file("flavor.yaml", polyaccel::fuzz::as_string(data, size));
  if (flavor) {
    auto request = polyaccel::place::parse_request(flavor->request, flavor->aliases);
    if (!request) POLYACCEL_FUZZ_CHECK(!request.error().message().empty());
  } else {
    POLYACCEL_FUZZ_CHECK(flavor.error().message().find("flavor.yaml") != std::string::npos);
  }
  return 0;
}
