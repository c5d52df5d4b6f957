// kubeconfig_file: the DRA driver's --kubeconfig. A kubeconfig is either refused with a message
// naming it, or gives an http(s) server URL with a host and without a trailing slash; nothing but
// our Error leaves it.
#include "fuzz_support.h"
#include "kube_api/client.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto path = polyaccel::fuzz::scratch_file(polyaccel::fuzz::as_string(data, size), "kubeconfig");
  auto config = polyaccel::kube_api::kubeconfig_file(path.string());
  if (!config) {
    POLYACCEL_FUZZ_CHECK(config.error().message().find(path.string()) != std::string::npos);
    return 0;
  }
  const std::string& url = config->server;
  POLYACCEL_FUZZ_CHECK(url.rfind("https://", 0) == 0 || url.rfind("http://", 0) == 0);
  POLYACCEL_FUZZ_CHECK(url.back() != '/' && url.find_first_of(" ?#") == std::string::npos);
  return 0;
}
