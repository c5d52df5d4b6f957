// fake_kubelet: the tests' kubelet (fake_kubelet.h) as a program, for a test that runs the agent
// where a gtest cannot reach it: in a container of the built image
// (tests/guest/image_daemonset.py). Serves Registration on DIR/kubelet.sock; when RESOURCE
// registers, dials the plugin, reads its ListAndWatch stream until it lists COUNT devices (printing
// each healthy device's id), then waits for the stream to end, as it does when the agent stops.
// Each step is one line on stdout. Usage: fake_kubelet DIR RESOURCE COUNT TIMEOUT_S.  Exit 0: all
// seen; 1: a step timed out.
#include <chrono>
#include <iostream>
#include <string>

#include "kube/fake_kubelet.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: fake_kubelet DIR RESOURCE COUNT TIMEOUT_S\n";
    return 2;
  }
  const std::string dir = argv[1], resource = argv[2];
  const size_t count = std::stoul(argv[3]);
  const auto timeout = std::chrono::seconds(std::stoul(argv[4]));
  polyaccel::testing::FakeKubelet kubelet(dir);
  std::cout << "listening " << dir << "/kubelet.sock" << std::endl;
  auto ep = kubelet.endpoint(resource, timeout);
  if (!ep) {
    std::cout << "FAIL no registration of " << resource << std::endl;
    return 1;
  }
  std::cout << "registered " << resource << " endpoint " << ep->request.endpoint() << std::endl;
  auto update = kubelet.wait_update(
      ep, [&](const auto& r) { return static_cast<size_t>(r.devices_size()) >= count; }, timeout);
  if (!update) {
    std::cout << "FAIL no ListAndWatch response with " << count << " devices" << std::endl;
    return 1;
  }
  for (const auto& d : update->devices())
    std::cout << "device " << d.id() << " " << d.health() << std::endl;
  // The stream ends when the plugin stops (the agent's SIGTERM).
  if (kubelet.wait_stream_end(ep, timeout)) {
    std::cout << "stream ended" << std::endl;
    return 0;
  }
  std::cout << "FAIL the ListAndWatch stream did not end" << std::endl;
  return 1;
}
