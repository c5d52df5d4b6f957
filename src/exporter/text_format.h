// Prometheus' text exposition format (0.0.4) and the gzip of a scrape's answer.
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <string_view>
#include <vector>

namespace polyaccel::exporter {

// The families as prometheus-cpp's TextSerializer writes them, byte for byte (exporter_test
// compares the two), built in one string: TextSerializer writes every character of a label
// value through an ostream, which made it most of a scrape's cost on label-heavy DCGM series.
std::string text_format(const std::vector<prometheus::MetricFamily>& families);

// gzip (RFC 1952) of `data` at zlib's fastest level: a scrape is compressed once and read once,
// so CPU counts more than the last 10 % of bytes. Empty when zlib fails.
std::string gzip(std::string_view data);

}  // namespace polyaccel::exporter
