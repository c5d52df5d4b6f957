// One scrape as JSON (`agent --once --json`, docs/exporter.md): the same families and samples as
// the Prometheus text, for scripts that do not parse the exposition format.
#pragma once

#include <nlohmann/json.hpp>

#include "exporter/collector.h"

namespace polyaccel::exporter {

inline constexpr int kScrapeJsonSchemaVersion = 1;

// {"schema_version": 1, "families": [{"name", "help", "type", "samples": [{"labels", "value"}]}]}
nlohmann::json families_json(const Families& families);

}  // namespace polyaccel::exporter
