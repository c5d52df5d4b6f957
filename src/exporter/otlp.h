// OTLP/HTTP with protobuf: the agent's hw.* metrics (hw_metrics.h) as one
// ExportMetricsServiceRequest, POSTed to <endpoint>/v1/metrics as application/x-protobuf
// (OpenTelemetry's OTLP specification, "OTLP/HTTP"). Counters are monotonic cumulative sums,
// up-down counters non-monotonic cumulative sums, gauges gauges; the resource says which host.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "exporter/hw_metrics.h"

namespace polyaccel::exporter {

struct OtlpResource {
  std::string host_name;      // host.name
  std::string k8s_node_name;  // k8s.node.name; empty: not sent
  std::string service_version;
};

// The serialized request. `start` is the start time of the cumulative sums (when the agent
// started), `now` the time of every point.
std::string otlp_request(const std::vector<HwMetric>& metrics, const OtlpResource& resource,
                         std::chrono::system_clock::time_point start,
                         std::chrono::system_clock::time_point now);

// --otlp-endpoint: an http:// or https:// URL with a host and no query or fragment; a trailing
// "/" is dropped. The request goes to it + "/v1/metrics", as OTEL_EXPORTER_OTLP_ENDPOINT.
Result<std::string> parse_otlp_endpoint(const std::string& text);

}  // namespace polyaccel::exporter
