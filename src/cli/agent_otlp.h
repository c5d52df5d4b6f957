// The agent's OTLP push (--otlp-endpoint, --otlp-interval; docs/exporter.md): a thread of its
// own that every interval encodes the accelerators' hw.* metrics (exporter/otlp.h) and POSTs
// them to <endpoint>/v1/metrics over libcurl (kube_api's client). A failed push is logged (once,
// then when the failure changes or ends) and the next interval tries again; scrapes of /metrics
// never wait on it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/pod_assignments.h"
#include "discover/accel/monitor.h"
#include "exporter/otlp.h"

namespace polyaccel::cli {

// What a push is made of: the accelerators and the pods holding them (DRA claims joined), as a
// scrape sees them (exporter::Scraper::input).
struct OtlpSources {
  std::shared_ptr<const AcceleratorSnapshot> accelerators;
  std::shared_ptr<const PodAssignments> pods;
};

struct OtlpPushOptions {
  std::string endpoint;  // checked by exporter::parse_otlp_endpoint
  std::chrono::milliseconds interval{10000};
  exporter::OtlpResource resource;
};

class OtlpPusher {
 public:
  // Starts the thread; the first push is one interval after the first sample.
  static Result<std::unique_ptr<OtlpPusher>> start(OtlpPushOptions options,
                                                   std::function<OtlpSources()> sources);
  ~OtlpPusher();
  void stop();

 private:
  OtlpPusher(OtlpPushOptions options, std::function<OtlpSources()> sources);
  void run();
  OtlpPushOptions options_;
  std::function<OtlpSources()> sources_;
  std::chrono::system_clock::time_point started_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  struct Client;
  std::unique_ptr<Client> client_;
  std::thread thread_;
};

}  // namespace polyaccel::cli
