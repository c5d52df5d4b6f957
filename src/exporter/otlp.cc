#include "exporter/otlp.h"

#include <cstdint>

#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"

namespace polyaccel::exporter {
namespace {

namespace common = opentelemetry::proto::common::v1;
namespace metrics = opentelemetry::proto::metrics::v1;

void set(common::KeyValue* kv, const std::string& key, const std::string& value) {
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}

std::uint64_t unix_nano(std::chrono::system_clock::time_point t) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return ns < 0 ? 0 : static_cast<std::uint64_t>(ns);
}

}  // namespace

std::string otlp_request(const std::vector<HwMetric>& hw, const OtlpResource& resource,
                         std::chrono::system_clock::time_point start,
                         std::chrono::system_clock::time_point now) {
  opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest request;
  metrics::ResourceMetrics* rm = request.add_resource_metrics();
  auto* attrs = rm->mutable_resource()->mutable_attributes();
  set(attrs->Add(), "service.name", "polyaccel");
  if (!resource.service_version.empty())
    set(attrs->Add(), "service.version", resource.service_version);
  if (!resource.host_name.empty()) set(attrs->Add(), "host.name", resource.host_name);
  if (!resource.k8s_node_name.empty()) set(attrs->Add(), "k8s.node.name", resource.k8s_node_name);
  metrics::ScopeMetrics* sm = rm->add_scope_metrics();
  sm->mutable_scope()->set_name("polyaccel");
  if (!resource.service_version.empty()) sm->mutable_scope()->set_version(resource.service_version);
  const std::uint64_t start_ns = unix_nano(start), now_ns = unix_nano(now);
  for (const auto& m : hw) {
    metrics::Metric* out = sm->add_metrics();
    out->set_name(m.name);
    out->set_description(m.description);
    out->set_unit(m.unit);
    google::protobuf::RepeatedPtrField<metrics::NumberDataPoint>* points;
    bool cumulative = m.instrument != HwInstrument::gauge;
    if (cumulative) {
      metrics::Sum* sum = out->mutable_sum();
      sum->set_aggregation_temporality(metrics::AGGREGATION_TEMPORALITY_CUMULATIVE);
      sum->set_is_monotonic(m.instrument == HwInstrument::counter);
      points = sum->mutable_data_points();
    } else {
      points = out->mutable_gauge()->mutable_data_points();
    }
    points->Reserve(static_cast<int>(m.points.size()));
    for (const auto& p : m.points) {
      metrics::NumberDataPoint* dp = points->Add();
      for (const auto& [key, value] : p.attributes)
        set(dp->add_attributes(), key, value);
      if (cumulative) dp->set_start_time_unix_nano(start_ns);
      dp->set_time_unix_nano(now_ns);
      dp->set_as_double(p.value);
    }
  }
  return request.SerializeAsString();
}

Result<std::string> parse_otlp_endpoint(const std::string& text) {
  const std::string input = "--otlp-endpoint " + text;
  std::string rest;
  if (text.starts_with("http://"))
    rest = text.substr(7);
  else if (text.starts_with("https://"))
    rest = text.substr(8);
  else
    return bad_input(input, "is not an http:// or https:// URL",
                     "give the collector's OTLP/HTTP base URL, e.g. http://otel-collector:4318");
  if (rest.empty() || rest.front() == '/')
    return bad_input(input, "has no host", "e.g. http://otel-collector:4318");
  for (unsigned char c : text) {
    if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#')
      return bad_input(input, "holds a space, a control character, '?' or '#'",
                       "give a base URL without query or fragment");
  }
  std::string url = text;
  while (url.ends_with("/"))
    url.pop_back();
  return url;
}

}  // namespace polyaccel::exporter
