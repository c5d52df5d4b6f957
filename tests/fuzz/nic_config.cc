// parse_nic_config: the device plugin's NIC config (--nic-config): the sriov-network-device-
// plugin's resourceList and the RDMA shared device plugin's configList. A config that parses is
// one the plugin serves: every pool named once as "<prefix>/<name>", with selectors and a share
// count in range; a refusal names the file.
#include <set>

#include "fuzz_support.h"
#include "kube/nic_resources.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto config = polyaccel::parse_nic_config(polyaccel::fuzz::as_string(data, size), "nic.yaml");
  if (!config) {
    POLYACCEL_FUZZ_CHECK(config.error().message().find("nic.yaml") != std::string::npos);
    POLYACCEL_FUZZ_CHECK(config.error().message().find('\n') == std::string::npos);
    return 0;
  }
  std::set<std::string> names;
  for (const auto& pool : config->pools) {
    POLYACCEL_FUZZ_CHECK(names.insert(pool.resource).second);
    auto slash = pool.resource.find('/');
    POLYACCEL_FUZZ_CHECK(slash != std::string::npos && slash > 0 &&
                         slash + 1 < pool.resource.size());
    POLYACCEL_FUZZ_CHECK(!pool.selectors.empty());
    POLYACCEL_FUZZ_CHECK(pool.max_pods >= 1 && pool.max_pods <= 100000);
    POLYACCEL_FUZZ_CHECK(pool.line >= 1);
  }
  return 0;
}
