// Prometheus' text exposition format (0.0.4) and the gzip of a scrape's answer.
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <string_view>
#include <vector>

#include "exporter/hw_metrics.h"

namespace polyaccel::exporter {

// The families as prometheus-cpp's TextSerializer writes them, byte for byte (exporter_test
// compares the two), built in one string: TextSerializer writes every character of a label
// value through an ostream, which made it most of a scrape's cost on label-heavy DCGM series.
std::string text_format(const std::vector<prometheus::MetricFamily>& families);

// The hw.* metrics in the text format 1.0.0 with UTF-8 names (accept_header.h): every name and
// attribute key quoted, the name inside the braces ({"hw.power","hw.id"="GPU-..."} 652.3);
// counters as counters, up-down counters and gauges as gauges.
std::string hw_text_format(const std::vector<HwMetric>& metrics);

// gzip (RFC 1952) of `data` at zlib's fastest level: a scrape is compressed once and read once,
// so CPU counts more than the last 10 % of bytes. Empty when zlib fails.
std::string gzip(std::string_view data);

}  // namespace polyaccel::exporter
