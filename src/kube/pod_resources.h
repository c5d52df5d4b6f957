// A client of kubelet's pod-resources API v1 (../shared/reference/kubelet-apis.md §2): which
// pods hold which devices, for the exporter's pod/namespace/container labels.
//
// Read in the background, never on a scrape: List is called every `interval`, never more often
// than `min_gap` (kubelet rate-limits the socket for every client of the node), and the answer is
// cached as an immutable PodAssignments. No socket (a host without kubelet): no pods, no error,
// and no log line; a socket that stops answering is logged once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/pod_assignments.h"

namespace polyaccel {

inline constexpr const char* kPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

struct PodResourcesOptions {
  std::string socket = kPodResourcesSocket;
  std::chrono::milliseconds interval{10000};
  std::chrono::milliseconds min_gap{1000};  // rate limit between two List calls
  std::chrono::milliseconds timeout{5000};  // deadline of one List
};

// One List call now: the assignments, or reachable = false with the reason.
PodAssignments list_pod_resources(const PodResourcesOptions& options);

class PodResourcesClient {
 public:
  explicit PodResourcesClient(PodResourcesOptions options);
  ~PodResourcesClient();
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;

  void start();
  void stop();
  std::shared_ptr<const PodAssignments> snapshot() const;
  // Asks for a List before the interval ends (still no sooner than min_gap after the last one):
  // the device plugin calls it after an Allocate.
  void refresh_soon();
  std::uint64_t lists() const;  // List calls made, for tests of the rate limit

 private:
  void run();

  const PodResourcesOptions options_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool wake_ = false;
  std::uint64_t lists_ = 0;
  std::string last_error_;
  std::shared_ptr<const PodAssignments> snapshot_;
};

}  // namespace polyaccel
