// Prometheus 3's content negotiation of UTF-8 metric names: a scraper that sends
// `Accept: text/plain;version=1.0.0;escaping=allow-utf-8` (or an OpenMetrics range with
// escaping=allow-utf-8, which we answer in the text format) takes names outside
// [a-zA-Z_:][a-zA-Z0-9_:]*, written quoted ({"hw.gpu.utilization","hw.id"="..."}). The agent
// then adds the hw.* families (hw_metrics.h) to what it serves; every other scraper gets the
// body as before. docs/exporter.md, "UTF-8 names".
#pragma once

#include <string_view>

namespace polyaccel::exporter {

// Whether some media range of `accept` with q > 0 is text/plain or
// application/openmetrics-text with the parameter escaping=allow-utf-8. Case-insensitive in
// types and parameter names; a malformed range counts as not asking. Reads at most the first
// 8 KiB (the HTTP front refuses longer heads anyway).
bool accepts_utf8_names(std::string_view accept);

// The Content-Type of such an answer.
inline constexpr std::string_view kUtf8TextContentType =
    "text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8";

}  // namespace polyaccel::exporter
