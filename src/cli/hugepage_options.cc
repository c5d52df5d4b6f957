#include "cli/hugepage_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>

#include "core/byte_size.h"
#include "core/page_size.h"

namespace polyaccel::cli {

void add_hugepage_options(CLI::App* cmd, HugepageOptions& options, const std::string& what) {
  cmd->add_option("--hugepages-per-node", options.per_node,
                  "hugepages on every NUMA node, e.g. 64GiB: " + what)
      ->type_name("SIZE");
  cmd->add_option("--hugepage-size", options.page_size,
                  "page size for --hugepages-per-node: 2MiB (default) or 1GiB")
      ->type_name("SIZE");
}

std::string hugepage_option_size(std::uint64_t bytes) {
  if (bytes % (std::uint64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  return std::to_string((bytes + (std::uint64_t{1} << 20) - 1) >> 20) + "MiB";
}

Result<HugepageWhatIf> parse_hugepage_options(const HugepageOptions& o) {
  HugepageWhatIf w;
  auto page = parse_byte_size(o.page_size);
  // The page size first: a per-node size below a page it cannot be is the page size's fault.
  if (!page || !is_page_size(*page)) {
    return bad_input("--hugepage-size", "'" + o.page_size +
                                            "' is not a page size: a power of two from 4KiB to "
                                            "16GiB, like 2MiB or 1GiB");
  }
  w.page_size = *page;
  if (!o.per_node.empty()) {
    auto bytes = parse_byte_size(o.per_node);
    if (!bytes) return bad_input("--hugepages-per-node", "'" + o.per_node + "' is not a size");
    if (*bytes < *page) {
      return bad_input("--hugepages-per-node", "'" + o.per_node +
                                                   "' is less than one --hugepage-size page (" +
                                                   format_byte_size(*page) + ")");
    }
    w.per_node_bytes = *bytes;
  }
  return w;
}

void assume_hugepages(HostModel& model, const HugepageWhatIf& w) {
  if (w.per_node_bytes == 0) return;
  const std::uint64_t pages = w.per_node_bytes / w.page_size;
  for (auto& node : model.numa_nodes) {
    if (node.kind != NumaKind::dram || node.memory_bytes == 0) continue;
    auto it = std::find_if(node.hugepages.begin(), node.hugepages.end(),
                           [&](const Hugepages& h) { return h.size_bytes == w.page_size; });
    if (it == node.hugepages.end()) {
      node.hugepages.push_back(Hugepages{w.page_size, 0, 0});
      it = std::prev(node.hugepages.end());
    }
    // In use: what the node holds less what is free (a capture tells no free count: none).
    const std::uint64_t used = it->free ? it->total - std::min(it->total, *it->free) : 0;
    it->total = std::max(it->total, pages);
    it->free = it->total - std::min(it->total, used);
  }
  for (auto& node : model.numa_nodes) {
    std::sort(node.hugepages.begin(), node.hugepages.end(),
              [](const Hugepages& a, const Hugepages& b) { return a.size_bytes < b.size_bytes; });
  }
}

}  // namespace polyaccel::cli
