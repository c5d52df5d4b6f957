// The hugepage what-if of `audit` and `place`: --hugepages-per-node SIZE --hugepage-size SIZE,
// one definition and one parser for both, so that a flavor `flavors` sizes for 1 GiB pages can be
// checked with `place` on a capture that reserves none yet.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/host_model.h"

namespace CLI {
class App;
}

namespace polyaccel::cli {

struct HugepageOptions {
  std::string per_node;            // --hugepages-per-node SIZE; empty: no what-if
  std::string page_size = "2MiB";  // --hugepage-size SIZE
};

struct HugepageWhatIf {
  std::uint64_t per_node_bytes = 0;  // 0: none asked for
  std::uint64_t page_size = 2ull << 20;
};

// Adds both options to `cmd`; `what` says what the command does with them.
void add_hugepage_options(CLI::App* cmd, HugepageOptions& options, const std::string& what);

Result<HugepageWhatIf> parse_hugepage_options(const HugepageOptions& options);

// A size as these options take it: "64GiB", else whole MiB ("1536MiB").
std::string hugepage_option_size(std::uint64_t bytes);

// The model as if every DRAM node with memory had reserved `per_node_bytes` of pages of
// `page_size` (at least what it holds now); the pages in use stay in use. No-op without a what-if.
void assume_hugepages(HostModel& model, const HugepageWhatIf& what_if);

}  // namespace polyaccel::cli
